// The generated-code family's device kernel (generated_runner.h).
#include "cuda_runtime/plugin/generated_runner.h"

#include <chrono>

#include <utility>
#include <vector>

#include "cuda_runtime/compile/nvrtc_compiler.h"
#include "cuda_runtime/plugin/driver_api.h"

namespace fusionopt::cuda {
namespace {

// Above this much dynamic shared memory a kernel must opt in (cuFuncSetAttribute).
constexpr uint32_t kDefaultDynamicSharedLimit = 48 * 1024;
constexpr uint64_t kMaxThreadsPerBlock = 1024;

// What the kernel's parameter list looks like (generated_kernel.h): which body inputs are
// passed (all but initializers), how many outputs, and whether a workspace follows.
struct ParameterLayout {
  std::vector<bool> input_passed;  // per body input
  size_t num_outputs = 0;
  bool workspace = false;
  size_t num_constants = 0;

  size_t count() const {
    size_t passed = 0;
    for (bool is_passed : input_passed) passed += is_passed ? 1 : 0;
    return passed + num_constants + num_outputs + (workspace ? 1 : 0);
  }
};

ParameterLayout LayoutOf(const GeneratedProgram& program, const Graph& body) {
  ParameterLayout layout;
  for (const Value* input : body.inputs()) layout.input_passed.push_back(!input->is_initializer());
  layout.num_outputs = body.outputs().size();
  layout.workspace = program.workspace_bytes > 0;
  layout.num_constants = program.constant_inputs.size();
  return layout;
}

class GeneratedDeviceKernel final : public DeviceKernel {
 public:
  GeneratedDeviceKernel(GeneratedProgram program, ParameterLayout layout, GeneratedTarget target)
      : program_(std::move(program)), layout_(std::move(layout)), target_(std::move(target)) {}
  ~GeneratedDeviceKernel() override;

  Status Load(const CompiledModule& compiled);
  // Checks every constant the program reads is an initializer of `body`; uploads them unless
  // compile-only.
  Status PrepareConstants(const Graph& body, DeviceContext& context);

  uint64_t workspace_bytes() const override { return program_.workspace_bytes; }
  uint32_t launch_count() const override { return static_cast<uint32_t>(program_.kernels.size()); }
  std::string Describe() const override;
  Status Enqueue(const void* const* inputs, void* const* outputs, void* workspace) override;

 private:
  GeneratedProgram program_;
  ParameterLayout layout_;
  GeneratedTarget target_;
  const DriverApi* driver_ = nullptr;
  CUmodule module_ = nullptr;
  std::vector<CUfunction> functions_;  // one per program_.kernels entry
  std::vector<DeviceBuffer> constants_;
};

GeneratedDeviceKernel::~GeneratedDeviceKernel() {
  if (module_ == nullptr) return;
  // The module belongs to the device's primary context, which must be current to unload it.
  if (cudaSetDevice(target_.device) == cudaSuccess) (void)driver_->module_unload(module_);
}

Status GeneratedDeviceKernel::Load(const CompiledModule& compiled) {
  FUSIONOPT_ASSIGN_OR_RETURN(driver_, Driver());
  CUresult result = driver_->module_load_data(&module_, compiled.cubin.data());
  if (result != CUDA_SUCCESS) return DriverError(result, "cuModuleLoadData").WithContext(program_.name);
  for (const GeneratedKernel& kernel : program_.kernels) {
    CUfunction function = nullptr;
    result = driver_->module_get_function(&function, module_, kernel.entry.c_str());
    if (result != CUDA_SUCCESS) return DriverError(result, "cuModuleGetFunction").WithContext(kernel.entry);
    if (kernel.shared_bytes > kDefaultDynamicSharedLimit) {
      result = driver_->func_set_attribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                           static_cast<int>(kernel.shared_bytes));
      if (result != CUDA_SUCCESS) {
        return DriverError(result, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)").WithContext(kernel.entry);
      }
    }
    functions_.push_back(function);
  }
  return Status::Ok();
}

Status GeneratedDeviceKernel::PrepareConstants(const Graph& body, DeviceContext& context) {
  for (const std::string& name : program_.constant_inputs) {
    const Value* value = body.FindValue(name);
    if (value == nullptr || !value->is_initializer()) {
      return InternalError("program " + program_.name + " reads constant '" + name +
                           "', which is not an initializer of its body");
    }
    if (target_.compile_only) continue;
    FUSIONOPT_ASSIGN_OR_RETURN(DeviceBuffer buffer, context.Upload(*value->initializer()));
    constants_.push_back(std::move(buffer));
  }
  return Status::Ok();
}

std::string GeneratedDeviceKernel::Describe() const {
  std::string description = program_.description.empty() ? "generated kernel " + program_.name : program_.description;
  if (target_.compile_only) description += " (compile-only, sm_" + std::to_string(target_.sm_arch) + ")";
  return description;
}

Status GeneratedDeviceKernel::Enqueue(const void* const* inputs, void* const* outputs, void* workspace) {
  if (target_.compile_only) return CudaFailure("compile-only context: " + program_.name + " cannot be enqueued");
  // Parameter values first, then the array of their addresses cuLaunchKernel reads; sized
  // once so the addresses stay valid.
  std::vector<const void*> values;
  values.reserve(layout_.count());
  for (size_t i = 0; i < layout_.input_passed.size(); ++i) {
    if (layout_.input_passed[i]) values.push_back(inputs[i]);
  }
  for (const DeviceBuffer& constant : constants_) values.push_back(constant.get());
  for (size_t i = 0; i < layout_.num_outputs; ++i) values.push_back(outputs[i]);
  if (layout_.workspace) values.push_back(workspace);
  std::vector<void*> arguments;
  arguments.reserve(values.size());
  for (const void*& value : values) arguments.push_back(static_cast<void*>(&value));

  for (size_t k = 0; k < functions_.size(); ++k) {
    const GeneratedKernel& kernel = program_.kernels[k];
    CUresult result = driver_->launch_kernel(functions_[k], kernel.grid[0], kernel.grid[1], kernel.grid[2],
                                             kernel.block[0], kernel.block[1], kernel.block[2], kernel.shared_bytes,
                                             reinterpret_cast<CUstream>(target_.stream), arguments.data(), nullptr);
    if (result != CUDA_SUCCESS) return DriverError(result, "cuLaunchKernel").WithContext(kernel.entry);
  }
  return Status::Ok();
}

}  // namespace

Status CheckLaunchShapes(const GeneratedProgram& program) {
  if (program.kernels.empty()) return InternalError("program " + program.name + " has no kernels");
  for (const GeneratedKernel& kernel : program.kernels) {
    const std::string where = "program " + program.name + ", kernel '" + kernel.entry + "'";
    if (kernel.entry.empty()) return InternalError(where + ": no entry name");
    for (uint32_t extent : kernel.grid) {
      if (extent == 0) return InternalError(where + ": a zero grid dimension");
    }
    uint64_t threads = 1;
    for (uint32_t extent : kernel.block) {
      if (extent == 0) return InternalError(where + ": a zero block dimension");
      threads *= extent;
    }
    if (threads > kMaxThreadsPerBlock) {
      return InternalError(where + ": " + std::to_string(threads) + " threads a block (CUDA allows 1024)");
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<DeviceKernel>> BuildGeneratedKernel(const GeneratedProgram& program, const Graph& body,
                                                           const GeneratedTarget& target, DeviceContext& context) {
  FUSIONOPT_RETURN_IF_ERROR(CheckLaunchShapes(program));
  CompileOptions options;
  options.sm_arch = target.sm_arch;
  options.cubin = true;
  options.cache_dir = target.cache_dir;
  const auto started = std::chrono::steady_clock::now();
  Result<CompiledModule> compiled = CompileCuda(program.source, program.name, options);
  if (!compiled.ok()) return CompileFailure(compiled.status().message());
  if (target.compiled) {
    target.compiled(compiled->from_cache,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  if (compiled->cubin.empty()) return InternalError("NVRTC returned no CUBIN for " + program.name);

  auto kernel = std::make_unique<GeneratedDeviceKernel>(program, LayoutOf(program, body), target);
  if (!target.compile_only) FUSIONOPT_RETURN_IF_ERROR(kernel->Load(*compiled));
  FUSIONOPT_RETURN_IF_ERROR(kernel->PrepareConstants(body, context));
  return std::unique_ptr<DeviceKernel>(std::move(kernel));
}

}  // namespace fusionopt::cuda
