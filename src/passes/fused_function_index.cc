#include "passes/fused_function_index.h"

#include "ir/numbered_name.h"
#include "ir/op_class.h"
#include "text_format/text_format.h"

namespace fusionopt::passes {
namespace {

// k when `name` is `stem` (0) or NumberedName(stem, k); else -1.
int64_t SuffixOf(const std::string& name, const std::string& stem) {
  if (name == stem) return 0;
  auto [split_stem, suffix] = SplitNumberedName(name);
  return suffix > 0 && split_stem == stem ? suffix : -1;
}

}  // namespace

void FusedFunctionIndex::Synchronize(const Model& model) {
  if (built_ && functions_seen_ == model.functions.size()) return;
  by_body_.clear();
  names_.clear();
  first_free_suffix_.clear();
  for (const auto& function : model.functions) {
    if (function->domain != kFusionDomain) continue;
    names_.insert(function->name);
    by_body_[PrintGraph(*function->body)].push_back(function.get());
  }
  functions_seen_ = model.functions.size();
  built_ = true;
}

size_t FusedFunctionIndex::FirstFreeSuffix(const std::string& stem) {
  size_t& suffix = first_free_suffix_[stem];
  while (names_.count(NumberedName(stem, suffix))) ++suffix;
  return suffix;
}

std::pair<Function*, std::string> FusedFunctionIndex::FindOrName(Model& model, const std::string& stem,
                                                                 const std::string& body_text) {
  Synchronize(model);
  const size_t free_suffix = FirstFreeSuffix(stem);
  Function* found = nullptr;
  int64_t found_suffix = -1;
  if (auto it = by_body_.find(body_text); it != by_body_.end()) {
    for (Function* function : it->second) {
      const int64_t suffix = SuffixOf(function->name, stem);
      if (suffix >= 0 && static_cast<size_t>(suffix) < free_suffix && (found == nullptr || suffix < found_suffix)) {
        found = function;
        found_suffix = suffix;
      }
    }
  }
  if (found != nullptr) return {found, found->name};
  return {nullptr, NumberedName(stem, free_suffix)};
}

void FusedFunctionIndex::Add(const Model& model, Function* function, std::string body_text) {
  const bool just_appended = built_ && functions_seen_ + 1 == model.functions.size() &&
                             model.functions.back().get() == function;
  if (!just_appended) {
    built_ = false;  // someone else changed the functions too: rebuild on the next lookup
    return;
  }
  names_.insert(function->name);
  by_body_[std::move(body_text)].push_back(function);
  functions_seen_ = model.functions.size();
}

}  // namespace fusionopt::passes
