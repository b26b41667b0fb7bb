// The byte-table loops (cpu_runtime/elementwise/byte_table.h) against each other on this host,
// alternated in rounds, one thread: bytes per nanosecond over a 1.6 MB activation (YOLOv8n's
// first SiLU, 16×320×320 uint8) — what ActiveByteTableLoop's choice is based on.
//
//   build/fusionopt_bench_byte_table_loops [ROUNDS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "cpu_runtime/elementwise/byte_table.h"

namespace {

using fusionopt::cpu::ew::ByteTableLoop;

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const char* Name(ByteTableLoop loop) {
  switch (loop) {
    case ByteTableLoop::kScalar: return "scalar";
    case ByteTableLoop::kAvx512Bw: return "avx512bw pshufb";
    case ByteTableLoop::kVbmi: return "avx512 vbmi vpermi2b";
  }
  return "?";
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  const int64_t count = 16 * 320 * 320;
  std::vector<uint8_t> table(256), index(static_cast<size_t>(count)), out(static_cast<size_t>(count));
  for (int i = 0; i < 256; ++i) table[static_cast<size_t>(i)] = static_cast<uint8_t>((i * 167 + 13) % 256);
  for (int64_t i = 0; i < count; ++i) index[static_cast<size_t>(i)] = static_cast<uint8_t>((i * 2654435761u) >> 24);
  std::vector<ByteTableLoop> loops;
  for (ByteTableLoop loop : {ByteTableLoop::kScalar, ByteTableLoop::kAvx512Bw, ByteTableLoop::kVbmi}) {
    if (fusionopt::cpu::ew::HostRunsByteTableLoop(loop)) loops.push_back(loop);
  }
  std::vector<std::vector<double>> rates(loops.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t l = 0; l < loops.size(); ++l) {
      double best = 1e30;
      for (int run = 0; run < 20; ++run) {
        const double start = Seconds();
        fusionopt::cpu::ew::LookUpBytesWith(loops[l], table.data(), index.data(), out.data(), count);
        best = std::min(best, Seconds() - start);
      }
      rates[l].push_back(static_cast<double>(count) / best / 1e9);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  std::printf("| loop | bytes/ns, median of %d rounds (min–max) |\n|---|---:|\n", rounds);
  for (size_t l = 0; l < loops.size(); ++l) {
    std::vector<double> r = rates[l];
    std::sort(r.begin(), r.end());
    std::printf("| %s | %.2f (%.2f–%.2f) |\n", Name(loops[l]), r[r.size() / 2], r.front(), r.back());
  }
  std::printf("active on this host: %s\n", Name(fusionopt::cpu::ew::ActiveByteTableLoop()));
  return 0;
}
