#include "ir/broadcast.h"

namespace fusionopt {

std::optional<std::vector<int64_t>> BroadcastDims(const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<int64_t> out;
  for (const std::vector<int64_t>& shape : shapes) {
    if (shape.size() > out.size()) out.insert(out.begin(), shape.size() - out.size(), 1);
    const size_t offset = out.size() - shape.size();
    for (size_t axis = 0; axis < shape.size(); ++axis) {
      int64_t& target = out[offset + axis];
      if (shape[axis] == target || shape[axis] == 1) continue;
      if (target != 1) return std::nullopt;
      target = shape[axis];
    }
  }
  return out;
}

}  // namespace fusionopt
