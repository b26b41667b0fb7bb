// Running a generated CUDA kernel on the host, for numbers without a GPU: the generated
// source is compiled by the host compiler against a small shim of the CUDA names it uses
// (__global__, blockIdx/threadIdx, __half/__nv_bfloat16 and their conversions), into a shared
// object the test loads, and run as every thread of every block in turn. Fits kernels whose
// threads do not cooperate (no shared memory, barriers or warp shuffles): elementwise, data
// movement, window pooling, LRN.
#pragma once

#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "cuda_runtime/codegen/generated_kernel.h"
#include "scratch_dir.h"

namespace fusionopt::cuda {

// The CUDA names generated elementwise sources use, for the host compiler. Half and bfloat16
// round to nearest even like __float2half_rn / __float2bfloat16_rn.
inline constexpr const char* kHostShim = R"(#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(threads)
struct fo_shim_uint3 { unsigned int x = 0, y = 0, z = 0; };
fo_shim_uint3 blockIdx, threadIdx, blockDim, gridDim;
extern "C" void fo_shim_set(unsigned block, unsigned thread, unsigned block_dim, unsigned grid_dim) {
  blockIdx.x = block; threadIdx.x = thread; blockDim.x = block_dim; gridDim.x = grid_dim;
}
struct __half { uint16_t bits; };
struct __nv_bfloat16 { uint16_t bits; };
inline float __half2float(__half h) { _Float16 v; std::memcpy(&v, &h.bits, 2); return (float)v; }
inline __half __float2half_rn(float f) { _Float16 v = (_Float16)f; __half h; std::memcpy(&h.bits, &v, 2); return h; }
inline float __bfloat162float(__nv_bfloat16 b) { uint32_t u = (uint32_t)b.bits << 16; float f; std::memcpy(&f, &u, 4); return f; }
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t u; std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{(uint16_t)((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return __nv_bfloat16{(uint16_t)(u >> 16)};
}
inline float __int_as_float(int bits) { float f; std::memcpy(&f, &bits, 4); return f; }
inline double __longlong_as_double(long long bits) { double d; std::memcpy(&d, &bits, 8); return d; }
)";

// A generated kernel compiled by the host compiler into a shared object.
class HostKernel {
 public:
  HostKernel(const GeneratedProgram& program, const test_support::ScratchDir& scratch) : program_(program) {
    std::ofstream(scratch / "host_shim.h") << kHostShim;
    std::ofstream(scratch / "cuda_fp16.h") << "#include \"host_shim.h\"\n";
    std::ofstream(scratch / "cuda_bf16.h") << "#include \"host_shim.h\"\n";
    std::ofstream(scratch / "kernel.cc") << program.source;
    const std::string library = (scratch / "kernel.so").string();
    const std::string command = "g++ -std=c++17 -O1 -fPIC -shared -w -I" + scratch.path().string() + " " +
                                (scratch / "kernel.cc").string() + " -o " + library + " 2> " +
                                (scratch / "log.txt").string();
    const int status = std::system(command.c_str());
    std::ifstream log(scratch / "log.txt");
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    INFO(program.source << "\n" << text);
    REQUIRE(status == 0);
    handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE(handle_ != nullptr);
    entry_ = dlsym(handle_, program.kernels[0].entry.c_str());
    set_ = reinterpret_cast<void (*)(unsigned, unsigned, unsigned, unsigned)>(dlsym(handle_, "fo_shim_set"));
    REQUIRE(entry_ != nullptr);
    REQUIRE(set_ != nullptr);
  }
  ~HostKernel() {
    if (handle_ != nullptr) dlclose(handle_);
  }

  // Every thread of every block, in turn (the kernel's loops make the order irrelevant).
  void Launch(const std::vector<void*>& arguments) const {
    const GeneratedKernel& kernel = program_.kernels[0];
    for (unsigned block = 0; block < kernel.grid[0]; ++block) {
      for (unsigned thread = 0; thread < kernel.block[0]; ++thread) {
        set_(block, thread, kernel.block[0], kernel.grid[0]);
        Call(arguments);
      }
    }
  }

 private:
  // Every parameter of a generated kernel is a pointer, so the entry is called through a
  // function type of as many void* parameters (the same calling convention).
  template <size_t... I>
  void CallWith(const std::vector<void*>& arguments, std::index_sequence<I...>) const {
    using Entry = void (*)(decltype((void)I, static_cast<void*>(nullptr))...);
    reinterpret_cast<Entry>(entry_)(arguments[I]...);
  }
  void Call(const std::vector<void*>& arguments) const {
    switch (arguments.size()) {
      case 2: return CallWith(arguments, std::make_index_sequence<2>());
      case 3: return CallWith(arguments, std::make_index_sequence<3>());
      case 4: return CallWith(arguments, std::make_index_sequence<4>());
      case 5: return CallWith(arguments, std::make_index_sequence<5>());
      case 6: return CallWith(arguments, std::make_index_sequence<6>());
      case 7: return CallWith(arguments, std::make_index_sequence<7>());
      case 8: return CallWith(arguments, std::make_index_sequence<8>());
      default: FAIL("a kernel with " << arguments.size() << " parameters");
    }
  }

  const GeneratedProgram& program_;
  void* handle_ = nullptr;
  void* entry_ = nullptr;
  void (*set_)(unsigned, unsigned, unsigned, unsigned) = nullptr;
};

}  // namespace fusionopt::cuda
