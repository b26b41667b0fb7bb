#include "ir/numbered_name.h"

namespace fusionopt {

std::string NumberedName(std::string_view stem, int64_t suffix) {
  return suffix == 0 ? std::string(stem) : std::string(stem) + "_" + std::to_string(suffix);
}

std::pair<std::string_view, int64_t> SplitNumberedName(std::string_view name) {
  size_t underscore = name.rfind('_');
  if (underscore == std::string_view::npos) return {name, 0};
  std::string_view digits = name.substr(underscore + 1);
  if (digits.empty() || digits.size() > 9 || digits.front() == '0') return {name, 0};
  int64_t suffix = 0;
  for (char digit : digits) {
    if (digit < '0' || digit > '9') return {name, 0};
    suffix = suffix * 10 + (digit - '0');
  }
  return {name.substr(0, underscore), suffix};
}

}  // namespace fusionopt
