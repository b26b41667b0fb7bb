#include "onnx_io/operator_schemas.h"

#include <algorithm>
#include <array>
#include <tuple>

namespace fusionopt {
namespace {

constexpr int kUnbounded = OperatorSchema::kUnbounded;

// Sorted by domain, op type and since-version (the generator writes them so).
constexpr OperatorSchema kSchemas[] = {
#include "onnx_io/operator_schemas.inc"
};

auto Key(const OperatorSchema& schema) { return std::tie(schema.domain, schema.op_type); }

}  // namespace

std::string_view OperatorSchema::InputName(size_t index) const {
  std::string_view names = input_names;
  for (size_t i = 0; i < index; ++i) {
    const size_t comma = names.find(',');
    if (comma == std::string_view::npos) return names;  // a variadic tail: the last formal
    names.remove_prefix(comma + 1);
  }
  return names.substr(0, names.find(','));
}

const OperatorSchema* FindOperatorSchema(std::string_view domain, std::string_view op_type, int64_t opset) {
  if (domain == "ai.onnx") domain = "";
  const OperatorSchema probe{domain, op_type};
  auto [first, last] = std::equal_range(std::begin(kSchemas), std::end(kSchemas), probe,
                                        [](const OperatorSchema& a, const OperatorSchema& b) { return Key(a) < Key(b); });
  const OperatorSchema* found = nullptr;
  for (auto it = first; it != last && it->since_version <= opset; ++it) found = &*it;
  return found;
}

}  // namespace fusionopt
