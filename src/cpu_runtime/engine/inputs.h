// Inputs for a run: concrete shapes for symbolic dims, and seeded random data for inputs the
// user did not give (`fusionopt run`, `verify`, `bench` all feed models the same way).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cpu_runtime/engine/rt_tensor.h"
#include "ir/graph.h"

namespace fusionopt::cpu {

// Parses "NAME=1x3x224x224" (NAME may contain '='; the last one splits).
Result<std::pair<std::string, std::vector<int64_t>>> ParseShapeSpec(const std::string& spec);

// Dims for `input`: the --shape override when given (rank and known dims must agree), else
// the declared dims with every symbolic or unknown dim set to 1.
Result<std::vector<int64_t>> ConcreteDims(const Value& input,
                                          const std::map<std::string, std::vector<int64_t>>& overrides);

// Seeded random tensor: floats uniform in [-1, 1), integers in {0, 1} (valid as indices and
// masks), bools fair coins. The same seed, input index and dims give the same data.
Result<RtTensor> RandomTensor(DataType dtype, const std::vector<int64_t>& dims, uint64_t seed);

}  // namespace fusionopt::cpu
