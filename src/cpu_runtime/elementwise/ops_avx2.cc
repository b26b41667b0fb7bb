// The elementwise instructions for 8 float lanes: elementwise/ops.cc compiled again under
// GCC's avx2 target (its header says what that build may and may not touch). Execute picks
// this build when the CPU and the OS support AVX2 (elementwise/lanes.cc).
#define FUSIONOPT_EW_AVX2
#include "cpu_runtime/elementwise/ops.cc"  // NOLINT(bugprone-suspicious-include)
