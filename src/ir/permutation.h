// Transpose perms come from the model: before one indexes anything it must hold each of
// 0 .. size-1 exactly once (a hostile perm repeats axes, leaves some out, or names axes past
// the rank).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace fusionopt {

inline bool IsPermutation(std::vector<int64_t> perm) {
  std::sort(perm.begin(), perm.end());
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

}  // namespace fusionopt
