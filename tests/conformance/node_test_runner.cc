#include "node_test_runner.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <vector>

#include <onnx/onnx_pb.h>

#include "conformance_lists.h"
#include "cpu_runtime/engine/session.h"
#include "onnx_io/model_io.h"
#include "onnx_io/proto_codec.h"

namespace fusionopt::conformance {
namespace {

namespace fs = std::filesystem;
using cpu::NamedTensor;
using cpu::RtTensor;

struct DataSet {
  fs::path dir;
  std::vector<fs::path> inputs;   // input_0.pb, input_1.pb, ... without gaps
  std::vector<fs::path> outputs;  // output_0.pb, ...
};

std::vector<fs::path> NumberedFiles(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int k = 0;; ++k) {
    fs::path file = dir / (prefix + std::to_string(k) + ".pb");
    std::error_code error;
    if (!fs::is_regular_file(file, error)) break;
    files.push_back(file);
  }
  return files;
}

Result<std::vector<DataSet>> FindDataSets(const fs::path& folder) {
  std::vector<DataSet> sets;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(folder, error)) {
    std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind("test_data_set_", 0) != 0) continue;
    sets.push_back({entry.path(), NumberedFiles(entry.path(), "input_"), NumberedFiles(entry.path(), "output_")});
  }
  if (error) return IoError("cannot list '" + folder.string() + "': " + error.message());
  if (sets.empty()) return InvalidModel("no test_data_set_* folder");
  std::sort(sets.begin(), sets.end(), [](const DataSet& a, const DataSet& b) { return a.dir < b.dir; });
  return sets;
}

// The largest total size of one data set's input files.
uint64_t InputBytes(const std::vector<DataSet>& sets) {
  uint64_t largest = 0;
  for (const DataSet& set : sets) {
    uint64_t total = 0;
    for (const fs::path& file : set.inputs) {
      std::error_code error;
      uint64_t size = fs::file_size(file, error);
      if (!error) total += size;
    }
    largest = std::max(largest, total);
  }
  return largest;
}

Result<TensorPtr> ReadTensorFile(const fs::path& file) {
  std::string where = file.parent_path().filename().string() + "/" + file.filename().string();
  FUSIONOPT_ASSIGN_OR_RETURN(std::string bytes, ReadTextFile(file.string()));
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) return InvalidModel(where + " is not a TensorProto");
  ExternalDataResolver resolver(file.parent_path().string());
  auto tensor = DecodeTensor(proto, resolver);
  if (!tensor.ok()) return tensor.status().WithContext(where);
  if (tensor->dtype() == DataType::kString) {
    return Unsupported(where + ": string tensors are not computed by the CPU runtime");
  }
  return std::make_shared<const Tensor>(std::move(tensor).value());
}

// The test data of ONNX up to 1.13 stores bfloat16 values as uint16 bit patterns (numpy has
// no bfloat16); where the model declares bfloat16, the bits are read as what they are.
TensorPtr AsDeclared(const TensorPtr& tensor, const Value& declared) {
  if (declared.dtype() != DataType::kBFloat16 || tensor->dtype() != DataType::kUint16) return tensor;
  return std::make_shared<const Tensor>(
      Tensor::Borrowed(DataType::kBFloat16, tensor->dims(), tensor->bytes().data(), tensor->nbytes(), tensor));
}

// Feeds graph inputs in declaration order, skipping initializers (the test data omits them).
Result<std::vector<NamedTensor>> ReadFeeds(const Graph& graph, const DataSet& set) {
  std::vector<const Value*> fed;
  for (const Value* input : graph.inputs()) {
    if (!input->is_initializer()) fed.push_back(input);
  }
  if (fed.size() != set.inputs.size()) {
    return InvalidModel(set.dir.filename().string() + " has " + std::to_string(set.inputs.size()) +
                        " inputs, the model takes " + std::to_string(fed.size()));
  }
  std::vector<NamedTensor> feeds;
  for (size_t k = 0; k < fed.size(); ++k) {
    FUSIONOPT_ASSIGN_OR_RETURN(TensorPtr tensor, ReadTensorFile(set.inputs[k]));
    feeds.push_back({fed[k]->name(), RtTensor::WrapConstant(AsDeclared(tensor, *fed[k]))});
  }
  return feeds;
}

Status CheckTensorValues(const Graph& graph) {
  auto check = [](const Value* value, const char* role) -> Status {
    if (value->type().is_tensor()) return Status::Ok();
    return Unsupported("graph " + std::string(role) + " '" + value->name() +
                       "' is not a tensor (sequence/optional/map values are not supported by the CPU runtime)");
  };
  for (const Value* input : graph.inputs()) FUSIONOPT_RETURN_IF_ERROR(check(input, "input"));
  for (const Value* output : graph.outputs()) FUSIONOPT_RETURN_IF_ERROR(check(output, "output"));
  return Status::Ok();
}

Verdict FromStatus(const Status& status, Outcome otherwise, const std::string& stage) {
  Outcome outcome = status.code() == ErrorCode::kUnsupported ? Outcome::kUnsupported : otherwise;
  return {outcome, stage + ": " + status.message()};
}

// Runs one data set; kPass when every output matches.
Verdict RunDataSet(cpu::Session& session, const Graph& graph, const DataSet& set, const Tolerance& tolerance) {
  std::string label = set.dir.filename().string();
  auto feeds = ReadFeeds(graph, set);
  if (!feeds.ok()) return FromStatus(feeds.status(), Outcome::kBadTest, "test data");
  if (set.outputs.size() != graph.outputs().size()) {
    return {Outcome::kBadTest, label + " has " + std::to_string(set.outputs.size()) + " outputs, the model has " +
                                   std::to_string(graph.outputs().size())};
  }
  auto results = session.Run(*feeds);
  if (!results.ok()) return FromStatus(results.status(), Outcome::kError, "Run");
  for (size_t k = 0; k < set.outputs.size(); ++k) {
    auto expected = ReadTensorFile(set.outputs[k]);
    if (!expected.ok()) return FromStatus(expected.status(), Outcome::kBadTest, "test data");
    const NamedTensor& actual = (*results)[k];
    RtTensor want = RtTensor::WrapConstant(AsDeclared(*expected, *graph.outputs()[k]));
    auto mismatch = CompareTensors(want, actual.tensor, tolerance);
    if (mismatch) {
      return {Outcome::kMismatch, label + " output " + std::to_string(k) + " '" + actual.name + "': " + *mismatch};
    }
  }
  return {};
}

Verdict RunNodeTestUnguarded(const fs::path& folder, const NodeTestOptions& options) {
  auto sets = FindDataSets(folder);
  if (!sets.ok()) return {Outcome::kBadTest, sets.status().message()};
  if (uint64_t bytes = InputBytes(*sets); bytes > options.max_input_bytes) {
    return {Outcome::kSkipped, "inputs of " + std::to_string(bytes >> 20) + " MB"};
  }
  auto model = LoadModel((folder / "model.onnx").string());
  if (!model.ok()) return FromStatus(model.status(), Outcome::kBadTest, "model.onnx does not load");
  auto session = cpu::Session::Create(**model);
  if (!session.ok()) return FromStatus(session.status(), Outcome::kError, "Create");
  const Graph& graph = *(*model)->graph;
  if (Status status = CheckTensorValues(graph); !status.ok()) return FromStatus(status, Outcome::kError, "Create");
  for (const DataSet& set : *sets) {
    Verdict verdict = RunDataSet(**session, graph, set, options.tolerance);
    if (verdict.outcome != Outcome::kPass) return verdict;
  }
  return {};
}

}  // namespace

std::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPass: return "pass";
    case Outcome::kUnsupported: return "unsupported";
    case Outcome::kError: return "error";
    case Outcome::kMismatch: return "mismatch";
    case Outcome::kBadTest: return "bad test";
    case Outcome::kCrash: return "crash";
    case Outcome::kTimeout: return "timeout";
    case Outcome::kSkipped: return "skipped";
  }
  return "?";
}

Verdict RunNodeTest(const fs::path& folder, const NodeTestOptions& options) {
  try {
    return RunNodeTestUnguarded(folder, options);
  } catch (const std::exception& error) {
    return {Outcome::kError, std::string("exception: ") + error.what()};
  }
}

}  // namespace fusionopt::conformance
