// A 256-entry table of bytes applied to bytes: out[i] = table[index[i]] — a quantized model's
// activation between a DequantizeLinear and a QuantizeLinear run as a table (fused/program.h).
// The loop is the widest the host has and the active vector ISA allows (engine/vector_isa.h):
// with AVX-512 VBMI, 64 elements take two vpermi2b and a blend by the top bit; with AVX-512BW,
// sixteen merge-masked pshufb over the table's 16-byte rows; else one load per element. Measured
// on a VBMI host (bench/byte_table_loops.cc; docs/benchmarks.md): scalar 3.2 bytes/ns, AVX-512BW
// 5.2, VBMI 13.8; sixteen AVX2 pshufb and blends per 32 bytes gave 3.1, no gain, so AVX2 hosts
// run the scalar loop.
#pragma once

#include <cstdint>

namespace fusionopt::cpu::ew {

enum class ByteTableLoop { kScalar, kAvx512Bw, kVbmi };

void LookUpBytes(const uint8_t* table, const uint8_t* index, uint8_t* out, int64_t count);

// The loop LookUpBytes runs on this host now, and whether the host can run `loop` (tests run
// every loop the host has against the scalar one).
ByteTableLoop ActiveByteTableLoop();
bool HostRunsByteTableLoop(ByteTableLoop loop);
void LookUpBytesWith(ByteTableLoop loop, const uint8_t* table, const uint8_t* index, uint8_t* out, int64_t count);

}  // namespace fusionopt::cpu::ew
