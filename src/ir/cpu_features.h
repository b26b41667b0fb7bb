#pragma once

// x86 features that `__builtin_cpu_supports` cannot name on every compiler we build with
// (clang 14 rejects "f16c" and "amx-tile"), read from CPUID in one place. Both answer false
// off x86.

namespace fusionopt {

// AVX with the OS saving its state, plus the F16C half<->float conversions.
bool CpuHasF16c();

// AMX tile instructions (reported only; the runtime issues none).
bool CpuHasAmxTile();

}  // namespace fusionopt
