#include "cpu_runtime/engine/host_cpu.h"

#include <unistd.h>

#include <fmt/format.h>

#include <dnnl.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cpu_runtime/engine/vector_isa.h"
#include "ir/cpu_features.h"

namespace fusionopt::cpu {
namespace {

std::string CpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t start = line.find_first_not_of(' ', colon + 1);
    return start == std::string::npos ? "unknown" : line.substr(start);
  }
  return "unknown";
}

std::string OneDnnIsaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    default: return fmt::format("isa {:#x}", static_cast<unsigned>(isa));
  }
}

int64_t CacheBytes(int name) {
  const long bytes = sysconf(name);
  return bytes > 0 ? bytes : 0;
}

std::string Bytes(int64_t bytes) {
  if (bytes <= 0) return "?";
  if (bytes % (1 << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{} KiB", bytes >> 10);
}

HostCpu ReadHost() {
  HostCpu host;
  host.model = CpuModelName();
  host.avx2 = CpuHasVectorIsa(VectorIsa::kAvx2);
  host.avx512 = CpuHasVectorIsa(VectorIsa::kAvx512);
  host.avx512_vnni = host.avx512 && __builtin_cpu_supports("avx512vnni");
  host.avx512_bf16 = host.avx512 && __builtin_cpu_supports("avx512bf16");
  host.avx512_vbmi = host.avx512 && CpuHasAvx512Vbmi();
  host.amx = CpuHasAmxTile();
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  host.onednn_isa = OneDnnIsaName(isa);
  host.onednn_avx512 = isa == dnnl::cpu_isa::avx512_core || isa == dnnl::cpu_isa::avx512_core_vnni ||
                       isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  const dnnl_version_t* version = dnnl_version();
  host.onednn_version = fmt::format("{}.{}.{}", version->major, version->minor, version->patch);
  host.vector_isa = VectorIsaName(ActiveVectorIsa());
  host.l1d_bytes = CacheBytes(_SC_LEVEL1_DCACHE_SIZE);
  host.l2_bytes = CacheBytes(_SC_LEVEL2_CACHE_SIZE);
  host.l3_bytes = CacheBytes(_SC_LEVEL3_CACHE_SIZE);
  host.logical_cpus = static_cast<int>(std::thread::hardware_concurrency());
  return host;
}

}  // namespace

std::string HostCpu::IsaLevel() const {
  if (avx512) {
    std::string extras;
    if (avx512_vnni) extras += "VNNI";
    if (avx512_bf16) extras += std::string(extras.empty() ? "" : ", ") + "BF16";
    if (avx512_vbmi) extras += std::string(extras.empty() ? "" : ", ") + "VBMI";
    if (amx) extras += std::string(extras.empty() ? "" : ", ") + "AMX";
    return extras.empty() ? "AVX-512" : "AVX-512 (" + extras + ")";
  }
  return avx2 ? "AVX2" : "SSE4.2 or older";
}

std::string HostCpu::Describe() const {
  return fmt::format("{}, {}; oneDNN {} on {}, own kernels {}; L1d {}, L2 {}, L3 {}; {} logical CPUs", model,
                     IsaLevel(), onednn_version, onednn_isa, vector_isa, Bytes(l1d_bytes), Bytes(l2_bytes),
                     Bytes(l3_bytes), logical_cpus);
}

std::string HostCpu::ToJson() const {
  nlohmann::ordered_json json = {{"cpu", model},
                                 {"isa", IsaLevel()},
                                 {"onednn_isa", onednn_isa},
                                 {"onednn_version", onednn_version},
                                 {"vector_isa", vector_isa},
                                 {"l1d_bytes", l1d_bytes},
                                 {"l2_bytes", l2_bytes},
                                 {"l3_bytes", l3_bytes},
                                 {"logical_cpus", logical_cpus}};
  return json.dump();
}

const HostCpu& ThisHost() {
  static const HostCpu host = ReadHost();
  return host;
}

}  // namespace fusionopt::cpu
