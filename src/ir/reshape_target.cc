#include "ir/reshape_target.h"

#include <optional>
#include <string>

namespace fusionopt {
namespace {

std::string Text(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i > 0 ? "," : "") + std::to_string(dims[i]);
  return text + "]";
}

}  // namespace

Result<std::vector<int64_t>> ResolveReshape(const std::vector<int64_t>& input, const std::vector<int64_t>& target,
                                            bool allow_zero) {
  int64_t total = 1;
  for (int64_t dim : input) {
    if (dim < 0 || __builtin_mul_overflow(total, dim, &total)) return InvalidModel("the input " + Text(input) + " is too large");
  }
  std::vector<int64_t> dims(target.size());
  int64_t known = 1;
  bool zero = false;
  std::optional<size_t> inferred;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t dim = target[i];
    if (dim == 0 && !allow_zero) {
      if (i >= input.size()) {
        return InvalidModel("shape entry " + std::to_string(i) + " is 0 but the input has rank " + std::to_string(input.size()));
      }
      dim = input[i];
    } else if (dim == -1) {
      if (inferred) return InvalidModel("the shape has more than one -1");
      inferred = i;
      continue;
    } else if (dim < 0) {
      return InvalidModel("the shape has the invalid entry " + std::to_string(dim));
    }
    zero = zero || target[i] == 0;
    if (__builtin_mul_overflow(known, dim, &known)) return InvalidModel("the shape " + Text(target) + " is too large");
    dims[i] = dim;
  }
  if (inferred) {
    if (allow_zero && zero) return InvalidModel("allowzero forbids a 0 beside a -1");
    if (known == 0 || total % known != 0) return InvalidModel("cannot reshape " + Text(input) + " to " + Text(target));
    dims[*inferred] = total / known;
  } else if (known != total) {
    return InvalidModel("cannot reshape " + Text(input) + " to " + Text(target));
  }
  return dims;
}

}  // namespace fusionopt
