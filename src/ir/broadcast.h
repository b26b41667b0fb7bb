// Numpy broadcasting of concrete dims, for every runtime that sizes an output from its operands
// (the CPU runtime's elementwise engine and fused row kernels, the CUDA generator's families):
// shapes align on their last axis, and each dim is the one dim all operands share or 1.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace fusionopt {

// The dims `shapes` broadcast to, or nullopt when two of them disagree on a dim neither has as 1.
// No shapes broadcast to a scalar ([]).
std::optional<std::vector<int64_t>> BroadcastDims(const std::vector<std::vector<int64_t>>& shapes);

}  // namespace fusionopt
