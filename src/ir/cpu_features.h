#pragma once

// x86 features that `__builtin_cpu_supports` cannot name on every compiler we build with
// (clang 14 rejects "f16c" and "amx-tile"), read from CPUID in one place. Both answer false
// off x86.

namespace fusionopt {

// AVX with the OS saving its state, plus the F16C half<->float conversions.
bool CpuHasF16c();

// AMX tile instructions (reported only; the runtime issues none).
bool CpuHasAmxTile();

// AVX-512 VBMI (byte permutes across a whole register: vpermi2b), CPUID leaf 7 ECX bit 1. The
// OS's saving of the 512-bit state is the caller's to check (VectorIsa::kAvx512 implies it).
bool CpuHasAvx512Vbmi();

}  // namespace fusionopt
