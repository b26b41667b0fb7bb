#include "cli/feeds.h"

#include <algorithm>

#include "cpu_runtime/engine/inputs.h"
#include "onnx_io/tensor_files.h"

namespace fusionopt::cli {

namespace {

// The dims of `input` that become 1 for want of a size: symbols --dim does not give, and
// unknown dims without a symbol (named "input[axis]").
void NoteDefaultedDims(const Value& input, const FeedOptions& options, std::vector<std::string>& defaulted) {
  if (!input.shape()) return;
  const Shape& shape = *input.shape();
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    const Dim& dim = shape[axis];
    if (dim.is_known() || (dim.is_symbolic() && options.dims.count(dim.symbol))) continue;
    std::string name = dim.is_symbolic() ? dim.symbol : input.name() + "[" + std::to_string(axis) + "]";
    if (std::find(defaulted.begin(), defaulted.end(), name) == defaulted.end()) defaulted.push_back(std::move(name));
  }
}

}  // namespace

Result<std::vector<cpu::NamedTensor>> MakeFeeds(const api::Session& session, const FeedOptions& options,
                                                uint64_t run_index, std::vector<std::string>* defaulted) {
  return MakeFeeds(session.input_values(), options, run_index, defaulted);
}

std::string DescribeFeeds(const std::vector<cpu::NamedTensor>& feeds) {
  std::string text;
  for (const cpu::NamedTensor& feed : feeds) {
    std::string dims;
    for (int64_t dim : feed.tensor.dims()) dims += (dims.empty() ? "" : "x") + std::to_string(dim);
    text += (text.empty() ? "" : ", ") + feed.name + " " + (dims.empty() ? "scalar" : dims) + " " +
            std::string(NameOf(feed.tensor.dtype()));
  }
  return text;
}

Result<std::vector<cpu::NamedTensor>> MakeFeeds(const std::vector<const Value*>& inputs, const FeedOptions& options,
                                                uint64_t run_index, std::vector<std::string>* defaulted) {
  std::map<std::string, std::vector<int64_t>> overrides;
  for (const auto& spec : options.shapes) {
    FUSIONOPT_ASSIGN_OR_RETURN(auto parsed, cpu::ParseShapeSpec(spec));
    overrides[parsed.first] = parsed.second;
  }
  std::map<std::string, std::string> files;
  for (const auto& spec : options.input_files) {
    size_t split = spec.find('=');
    if (split == std::string::npos || split == 0 || split + 1 == spec.size()) {
      return UsageError("--input '" + spec + "' is not NAME=FILE");
    }
    files[spec.substr(0, split)] = spec.substr(split + 1);
  }
  for (const auto& [name, dims] : overrides) {
    bool known = false;
    for (const Value* input : inputs) known = known || input->name() == name;
    if (!known) return UsageError("--shape names '" + name + "', which is not an input of the model");
  }
  std::vector<cpu::NamedTensor> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& input = *inputs[i];
    auto file = files.find(input.name());
    if (file != files.end()) {
      FUSIONOPT_ASSIGN_OR_RETURN(TensorPtr tensor, ReadTensorFile(file->second));
      if (tensor->dtype() == DataType::kString) return Unsupported("string inputs are not supported");
      feeds.push_back({input.name(), cpu::RtTensor::WrapConstant(tensor)});
      files.erase(file);
      continue;
    }
    if (input.is_initializer()) continue;  // keeps its default value
    if (defaulted != nullptr && !overrides.count(input.name())) NoteDefaultedDims(input, options, *defaulted);
    if (!overrides.count(input.name()) && input.shape() && !options.dims.empty()) {
      std::vector<int64_t> sized;
      for (const Dim& dim : *input.shape()) {
        auto size = dim.is_symbolic() ? options.dims.find(dim.symbol) : options.dims.end();
        sized.push_back(dim.is_known() ? dim.value : size != options.dims.end() ? size->second : 1);
      }
      overrides[input.name()] = std::move(sized);
    }
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> dims, cpu::ConcreteDims(input, overrides));
    DataType dtype = input.dtype() == DataType::kUndefined ? DataType::kFloat : input.dtype();
    uint64_t seed = options.seed * 1000003u + run_index * 7919u + i;
    FUSIONOPT_ASSIGN_OR_RETURN(cpu::RtTensor tensor, cpu::RandomTensor(dtype, dims, seed));
    feeds.push_back({input.name(), std::move(tensor)});
  }
  if (!files.empty()) {
    return UsageError("--input names '" + files.begin()->first + "', which is not an input of the model");
  }
  return feeds;
}

}  // namespace fusionopt::cli
