// What a Reshape's target means, for every place that resolves one at concrete sizes (the CPU
// runtime's Reshape kernel, the attention layout planner that the CPU kernel, the CUDA generator
// and the cost model share): 0 copies the input's dim at that position unless allowzero, one -1
// is the element count left over, and the result must hold exactly the input's elements.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/status.h"

namespace fusionopt {

// The dims `target` gives an input of dims `input`, or an InvalidModel status naming why not:
// a 0 past the input's rank, more than one -1, another negative entry, allowzero with both a 0
// and a -1 (ONNX leaves that undefined), a product that overflows, or a count that differs.
Result<std::vector<int64_t>> ResolveReshape(const std::vector<int64_t>& input, const std::vector<int64_t>& target,
                                            bool allow_zero);

}  // namespace fusionopt
