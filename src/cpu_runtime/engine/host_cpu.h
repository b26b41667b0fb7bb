// The CPU this process runs on, as the runtime sees it: the model name, the instruction sets
// its kernels use (what oneDNN dispatches to, and what the runtime's own kernels run on), cache sizes and logical CPUs. Benchmarks print it beside every
// figure (`fusionopt bench`, `fusionopt --version`, bench/*.py), since a speed measured on one
// instruction set says little about another; the runtime's host-dependent choices read it.
#pragma once

#include <cstdint>
#include <string>

namespace fusionopt::cpu {

struct HostCpu {
  std::string model;           // /proc/cpuinfo's "model name"; "unknown" when absent
  bool avx2 = false;
  bool avx512 = false;         // F, BW, DQ and VL: what "AVX-512" means to compilers and oneDNN
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool avx512_vbmi = false;  // byte permutes: the byte tables' 64-wide loop (elementwise/byte_table.h)
  bool amx = false;            // AMX tiles (bf16/int8)
  std::string onednn_isa;      // the instruction set oneDNN's kernels use here ("avx512_core_bf16", ...)
  bool onednn_avx512 = false;  // that set is AVX-512 or later: oneDNN runs its brgemm kernels
  std::string onednn_version;  // "3.2.1"
  std::string vector_isa;      // what the runtime's own kernels run on (engine/vector_isa.h)
  int64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;  // per core (L1, L2) and per package (L3); 0: unknown
  int logical_cpus = 0;

  // "AVX-512 (VNNI, BF16, VBMI)", "AVX2", "SSE4.2 or older"
  std::string IsaLevel() const;
  // One line: model, ISA level, oneDNN's ISA and version, elementwise build, caches, CPUs.
  std::string Describe() const;
  // The same as a JSON object (bench --json's "host").
  std::string ToJson() const;
};

// Read once per process.
const HostCpu& ThisHost();

}  // namespace fusionopt::cpu
