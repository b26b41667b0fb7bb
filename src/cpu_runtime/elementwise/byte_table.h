// A 256-entry table of bytes applied to bytes: out[i] = table[index[i]] — a quantized model's
// activation between a DequantizeLinear and a QuantizeLinear run as a table (fused/program.h).
// On AVX-512 VBMI hosts (with VectorIsa::kAvx512 active) 64 elements take two vpermi2b and a
// blend by the top bit; elsewhere one load per element.
#pragma once

#include <cstdint>

namespace fusionopt::cpu::ew {

void LookUpBytes(const uint8_t* table, const uint8_t* index, uint8_t* out, int64_t count);

// Whether LookUpBytes runs the VBMI loop on this host now.
bool LooksUpBytesWithVbmi();

}  // namespace fusionopt::cpu::ew
