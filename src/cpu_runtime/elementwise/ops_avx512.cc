// The elementwise instructions for 16 float lanes: elementwise/ops.cc compiled again under
// GCC's AVX-512 (F, BW, DQ, VL) target with 512-bit vectors (its header says what that build
// may and may not touch). Execute picks this build when the CPU and the OS support AVX-512
// (elementwise/lanes.cc).
#define FUSIONOPT_EW_AVX512
#include "cpu_runtime/elementwise/ops.cc"  // NOLINT(bugprone-suspicious-include)
