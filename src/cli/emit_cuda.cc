// `fusionopt MODEL -O3 -o OUT --emit-cuda DIR`: the CUDA C++ the plugin library would compile
// for every fused node of the optimized model, written where a person (or `nvcc --ptx`) can
// read it: DIR/<program>.cu, one self-contained translation unit per distinct program, and
// DIR/index.json, which maps every ai.fusionopt node of the main graph to its file, launch
// configuration and constants — or to the reason no generator handles it (contractions run on
// cuBLASLt / cuDNN and have no generated source).
//
// Generated code is specialised to static shapes, so symbolic dims of the main graph's inputs
// take their --dim sizes (1 when not given, as in the cost model) and the model is specialized
// as the CUDA backend plans a run (SpecializeForFeeds' shapes re-inferred, shape arithmetic
// folded) before generation; index.json records the sizes used and the --cuda-arch generated for.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cuda_runtime/backend/cuda_session.h"
#include "cuda_runtime/codegen/elementwise_codegen.h"
#include "cuda_runtime/codegen/generate.h"
#include "cuda_runtime/codegen/typed_body.h"
#include "ir/atomic_file.h"
#include "ir/op_class.h"
#include "shape_inference/shape_inference.h"

namespace fusionopt::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

// The dims of every main-graph input that has a shape, symbolic and unknown dims sized from
// `dims` (1 when not given); `used` gets the symbols' sizes.
std::map<std::string, std::vector<int64_t>> InputShapes(const Model& model,
                                                        const std::map<std::string, int64_t, std::less<>>& dims,
                                                        std::map<std::string, int64_t>& used) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const Value* input : model.graph->inputs()) {
    if (input->is_initializer() || !input->type().shape) continue;
    std::vector<int64_t>& sizes = shapes[input->name()];
    for (const Dim& dim : *input->type().shape) {
      if (dim.is_known()) {
        sizes.push_back(dim.value);
        continue;
      }
      auto it = dims.find(dim.symbol);
      const int64_t size = it != dims.end() ? it->second : 1;
      if (dim.is_symbolic()) used[dim.symbol] = size;
      sizes.push_back(size);
    }
  }
  return shapes;
}

ordered_json KernelsJson(const cuda::GeneratedProgram& program) {
  ordered_json kernels = ordered_json::array();
  for (const cuda::GeneratedKernel& kernel : program.kernels) {
    kernels.push_back({{"entry", kernel.entry},
                       {"grid", kernel.grid},
                       {"block", kernel.block},
                       {"shared_bytes", kernel.shared_bytes}});
  }
  return kernels;
}

// Programs by file name, so identical sources are written once and different sources that
// want the same name get a numbered one.
class ProgramFiles {
 public:
  // The file name for `program`, regenerating it under a free name when its own is taken by
  // another source.
  Result<std::string> Place(const Graph& body, cuda::GeneratedProgram& program, const cuda::CodegenTarget& target) {
    const std::string base = program.name;
    for (int suffix = 2;; ++suffix) {
      auto it = sources_.find(program.name);
      if (it == sources_.end()) {
        sources_.emplace(program.name, program.source);
        return program.name + ".cu";
      }
      if (it->second == program.source) return program.name + ".cu";
      FUSIONOPT_ASSIGN_OR_RETURN(program, cuda::GenerateKernel(body, base + "_" + std::to_string(suffix), target));
    }
  }
  const std::map<std::string, std::string>& sources() const { return sources_; }

 private:
  std::map<std::string, std::string> sources_;  // program name -> source
};

struct Emission {
  cuda::CodegenTarget target;
  ordered_json nodes = ordered_json::array();
  ProgramFiles files;
  int generated = 0;
  int unsupported = 0;
};

void EmitNode(const Model& model, const Node& node, Emission& emission) {
  ordered_json entry = {{"node", node.name()}, {"function", node.op_type()}};
  auto unsupported = [&](const Status& status) {
    entry["file"] = nullptr;
    entry["unsupported_reason"] = status.code() == ErrorCode::kUnsupported ? status.message()
                                                                           : "error: " + status.message();
    ++emission.unsupported;
  };
  auto body = cuda::TypedBodyOf(model, node);
  if (!body.ok()) {
    unsupported(body.status());
  } else {
    auto program = cuda::GenerateKernel(**body, cuda::CIdentifier(node.op_type()), emission.target);
    Result<std::string> file = program.ok() ? emission.files.Place(**body, *program, emission.target) : Result<std::string>(program.status());
    if (!file.ok()) {
      unsupported(file.status());
    } else {
      entry["file"] = *file;
      entry["kernels"] = KernelsJson(*program);
      entry["workspace_bytes"] = program->workspace_bytes;
      entry["constant_inputs"] = program->constant_inputs;
      entry["description"] = program->description;
      ++emission.generated;
    }
  }
  emission.nodes.push_back(std::move(entry));
}

}  // namespace

Status CheckEmitCudaDir(const std::string& dir) {
  std::error_code error;
  if (fs::exists(dir, error) && !fs::is_directory(dir, error)) {
    return IoError("--emit-cuda folder '" + dir + "' exists and is not a folder");
  }
  // The folder, or the nearest existing folder above it that it will be created in, must be
  // writable, so the error comes before the optimized model is written.
  fs::path existing = fs::absolute(dir, error);
  while (!existing.empty() && !fs::exists(existing, error) && existing != existing.parent_path()) {
    existing = existing.parent_path();
  }
  if (!fs::is_directory(existing, error)) {
    return IoError("--emit-cuda folder '" + dir + "' cannot be created: '" + existing.string() + "' is not a folder");
  }
  if (access(existing.c_str(), W_OK | X_OK) != 0) {
    return IoError("--emit-cuda folder '" + dir + "' cannot be written: '" + existing.string() + "' is read-only");
  }
  return Status::Ok();
}

Status EmitCuda(const Model& model, const std::string& dir, const std::map<std::string, int64_t, std::less<>>& dims,
                int cuda_arch) {
  FUSIONOPT_RETURN_IF_ERROR(CheckEmitCudaDir(dir));
  std::map<std::string, int64_t> bound;
  // Specialized as the CUDA backend plans a run: shapes inferred afresh at these sizes and the
  // shape arithmetic folded, so fused bodies see static Reshape targets.
  FUSIONOPT_ASSIGN_OR_RETURN(std::unique_ptr<Model> specialized,
                             cuda::SpecializeForShapes(model, InputShapes(model, dims, bound)));
  Emission emission;
  emission.target.sm_arch = cuda_arch;
  for (const auto& node : specialized->graph->nodes()) {
    if (node->domain() == kFusionDomain) EmitNode(*specialized, *node, emission);
  }
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return IoError("cannot create --emit-cuda folder '" + dir + "': " + error.message());
  for (const auto& [name, source] : emission.files.sources()) {
    FUSIONOPT_RETURN_IF_ERROR(WriteFileAtomically((fs::path(dir) / (name + ".cu")).string(), source));
  }
  ordered_json index = {{"symbolic_dims", bound},
                       {"cuda_arch", cuda_arch == 0 ? ordered_json(nullptr) : ordered_json(cuda_arch)},
                       {"nodes", emission.nodes}};
  // Written last: a folder with an index.json holds every file it names.
  FUSIONOPT_RETURN_IF_ERROR(WriteFileAtomically((fs::path(dir) / "index.json").string(),
                                                index.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"));
  spdlog::info("--emit-cuda: {} fused nodes generated ({} distinct .cu files), {} unsupported, in {}", emission.generated,
               emission.files.sources().size(), emission.unsupported, dir);
  return Status::Ok();
}

}  // namespace fusionopt::cli
