// Running a generated CUDA kernel on the host, for numbers without a GPU: the generated
// source is compiled by the host compiler against a small shim of the CUDA names it uses
// (__global__, blockIdx/threadIdx, __half/__nv_bfloat16 and their conversions), into a shared
// object the test loads.
//
// Launch runs every thread of every block in turn: kernels whose threads do not cooperate
// (elementwise, data movement, pooling, LRN, lines, resize, rotary). LaunchCooperative runs each
// block's threads as real threads, one block after another, for kernels that share memory and
// synchronise (attention, rows): __syncthreads is a barrier of the block's threads, a warp
// shuffle exchanges values through a per-warp slot array between two barriers of its 32 lanes
// (and so does the tensor cores' mma.sync, computed from the fragments every lane publishes),
// and the dynamic __shared__ array is a static buffer of the launch's size. A kernel whose warps
// diverge around a shuffle would deadlock here as it would misbehave on a GPU.
#pragma once

#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cuda_runtime/codegen/generated_kernel.h"
#include "scratch_dir.h"

namespace fusionopt::cuda {

// The CUDA names generated elementwise sources use, for the host compiler. Half and bfloat16
// round to nearest even like __float2half_rn / __float2bfloat16_rn.
inline constexpr const char* kHostShim = R"(#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(threads)
#define __shared__ static
struct fo_shim_uint3 { unsigned int x = 0, y = 0, z = 0; };
fo_shim_uint3 blockIdx, blockDim, gridDim;
thread_local fo_shim_uint3 threadIdx;
std::barrier<>* fo_block_barrier = nullptr;
std::barrier<>* fo_warp_barriers[32] = {};
unsigned long long fo_warp_slots[32][32];
extern "C" void fo_shim_set(unsigned block, unsigned thread, unsigned block_dim, unsigned grid_dim) {
  blockIdx.x = block; threadIdx.x = thread; blockDim.x = block_dim; gridDim.x = grid_dim;
}
extern "C" void fo_shim_begin_block(unsigned block, unsigned block_dim, unsigned grid_dim) {
  blockIdx.x = block; blockDim.x = block_dim; gridDim.x = grid_dim;
  fo_block_barrier = new std::barrier<>(block_dim);
  for (unsigned w = 0; w * 32 < block_dim; ++w) fo_warp_barriers[w] = new std::barrier<>(32);
}
extern "C" void fo_shim_set_thread(unsigned thread) { threadIdx.x = thread; }
extern "C" void fo_shim_end_block() {
  delete fo_block_barrier; fo_block_barrier = nullptr;
  for (auto*& barrier : fo_warp_barriers) { delete barrier; barrier = nullptr; }
}
inline void __syncthreads() { fo_block_barrier->arrive_and_wait(); }
template <typename T> T fo_shuffle(T value, unsigned from) {
  static_assert(sizeof(T) <= sizeof(unsigned long long));
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  std::memcpy(&fo_warp_slots[warp][lane], &value, sizeof(T));
  fo_warp_barriers[warp]->arrive_and_wait();
  T out;
  std::memcpy(&out, &fo_warp_slots[warp][from % 32], sizeof(T));
  fo_warp_barriers[warp]->arrive_and_wait();
  return out;
}
template <typename T> T __shfl_xor_sync(unsigned, T value, int mask) { return fo_shuffle(value, (threadIdx.x % 32) ^ mask); }
template <typename T> T __shfl_sync(unsigned, T value, int lane) { return fo_shuffle(value, static_cast<unsigned>(lane)); }
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
inline unsigned short __half_as_ushort(__half h) { return h.bits; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.bits; }
// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: D += A·B for the warp, each lane holding
// the fragments the PTX ISA's "Matrix Fragments for mma.m16n8k16" gives (groupID = lane >> 2,
// threadID_in_group = lane % 4; elements low half first). Every lane publishes its fragments,
// then computes its own four accumulators from the whole A and B.
unsigned fo_mma_slots[32][32][6];
template <float (*ToFloat)(uint16_t)>
void fo_shim_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  unsigned* mine = fo_mma_slots[warp][lane];
  for (int i = 0; i < 4; ++i) mine[i] = a[i];
  mine[4] = b0; mine[5] = b1;
  fo_warp_barriers[warp]->arrive_and_wait();
  float A[16][16], B[16][8];
  for (unsigned l = 0; l < 32; ++l) {
    const unsigned* slot = fo_mma_slots[warp][l];
    const unsigned group = l >> 2, column = (l % 4) * 2;
    for (unsigned half = 0; half < 2; ++half) {
      const unsigned shift = 16 * half;
      A[group][column + half] = ToFloat((uint16_t)(slot[0] >> shift));
      A[group + 8][column + half] = ToFloat((uint16_t)(slot[1] >> shift));
      A[group][column + 8 + half] = ToFloat((uint16_t)(slot[2] >> shift));
      A[group + 8][column + 8 + half] = ToFloat((uint16_t)(slot[3] >> shift));
      B[column + half][group] = ToFloat((uint16_t)(slot[4] >> shift));
      B[column + 8 + half][group] = ToFloat((uint16_t)(slot[5] >> shift));
    }
  }
  fo_warp_barriers[warp]->arrive_and_wait();
  const unsigned group = lane >> 2, column = (lane % 4) * 2;
  for (int i = 0; i < 4; ++i) {
    const unsigned row = group + 8 * (i >> 1), col = column + (i & 1);
    float sum = 0.0f;
    for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
    d[i] += sum;
  }
}
inline float fo_half_bits_to_float(uint16_t bits) { return __half2float(__half{bits}); }
inline float fo_bfloat16_bits_to_float(uint16_t bits) { return __bfloat162float(__nv_bfloat16{bits}); }
inline void fo_mma_m16n8k16_f16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  fo_shim_mma<&fo_half_bits_to_float>(d, a, b0, b1);
}
inline void fo_mma_m16n8k16_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  fo_shim_mma<&fo_bfloat16_bits_to_float>(d, a, b0, b1);
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
    // The dynamic shared array becomes a static buffer of the launch's size (one block runs at a time).
    std::string source = program.source;
    const std::string dynamic_shared = "extern __shared__ float shared[];";
    if (size_t at = source.find(dynamic_shared); at != std::string::npos) {
      source.replace(at, dynamic_shared.size(),
                     "static float shared[" + std::to_string(program.kernels[0].shared_bytes / 4 + 1) + "];");
    }
    std::ofstream(scratch / "kernel.cc") << source;
    const std::string library = (scratch / "kernel.so").string();
    const std::string command = "g++ -std=c++20 -O1 -fno-strict-aliasing -fPIC -shared -pthread -w -I" + scratch.path().string() + " " +
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
    begin_block_ = reinterpret_cast<void (*)(unsigned, unsigned, unsigned)>(dlsym(handle_, "fo_shim_begin_block"));
    set_thread_ = reinterpret_cast<void (*)(unsigned)>(dlsym(handle_, "fo_shim_set_thread"));
    end_block_ = reinterpret_cast<void (*)()>(dlsym(handle_, "fo_shim_end_block"));
    REQUIRE(entry_ != nullptr);
    REQUIRE(set_ != nullptr);
    REQUIRE((begin_block_ != nullptr && set_thread_ != nullptr && end_block_ != nullptr));
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

  // Each block's threads as real threads (see the header comment), blocks one after another.
  void LaunchCooperative(const std::vector<void*>& arguments) const {
    REQUIRE(arguments.size() >= 2);  // Call's arity is checked here, on the test's thread
    REQUIRE(arguments.size() <= 20);
    const GeneratedKernel& kernel = program_.kernels[0];
    for (unsigned block = 0; block < kernel.grid[0]; ++block) {
      begin_block_(block, kernel.block[0], kernel.grid[0]);
      std::vector<std::thread> threads;
      for (unsigned thread = 0; thread < kernel.block[0]; ++thread) {
        threads.emplace_back([this, &arguments, thread] {
          set_thread_(thread);
          Call(arguments);
        });
      }
      for (std::thread& thread : threads) thread.join();
      end_block_();
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
      case 9: return CallWith(arguments, std::make_index_sequence<9>());
      case 10: return CallWith(arguments, std::make_index_sequence<10>());
      case 11: return CallWith(arguments, std::make_index_sequence<11>());
      case 12: return CallWith(arguments, std::make_index_sequence<12>());
      case 13: return CallWith(arguments, std::make_index_sequence<13>());
      case 14: return CallWith(arguments, std::make_index_sequence<14>());
      case 15: return CallWith(arguments, std::make_index_sequence<15>());
      case 16: return CallWith(arguments, std::make_index_sequence<16>());
      case 17: return CallWith(arguments, std::make_index_sequence<17>());
      case 18: return CallWith(arguments, std::make_index_sequence<18>());
      case 19: return CallWith(arguments, std::make_index_sequence<19>());
      case 20: return CallWith(arguments, std::make_index_sequence<20>());
      default: FAIL("a kernel with " << arguments.size() << " parameters");
    }
  }

  const GeneratedProgram& program_;
  void* handle_ = nullptr;
  void* entry_ = nullptr;
  void (*set_)(unsigned, unsigned, unsigned, unsigned) = nullptr;
  void (*begin_block_)(unsigned, unsigned, unsigned) = nullptr;
  void (*set_thread_)(unsigned) = nullptr;
  void (*end_block_)() = nullptr;
};

}  // namespace fusionopt::cuda
