// Numbered names, the form every "first free name" search in fusionopt makes: `stem`, then
// `stem_1`, `stem_2`, ... (Graph::UniqueName for values, Graph::UniqueNodeName for nodes, the
// fused functions' names in passes/fused_function_index).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace fusionopt {

// `stem` for suffix 0, else `stem_<suffix>`.
std::string NumberedName(std::string_view stem, int64_t suffix);

// The stem and suffix NumberedName would have made `name` from ("stem_12" -> {"stem", 12}),
// or {name, 0} when `name` is no such name (no underscore, no digits, a leading zero).
std::pair<std::string_view, int64_t> SplitNumberedName(std::string_view name);

}  // namespace fusionopt
