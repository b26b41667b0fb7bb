// FusedFunctionIndex: OutlineGroup's lookup of the model's ai.fusionopt functions by body, so
// that identical bodies share one function and a new one gets the first free name of its stem
// in time independent of how many functions the model already has (a lookup that printed
// every same-named function per fusion made outlining quadratic on wide graphs).
//
// One lives in each PassContext, built on first use from the model's functions. Passes only
// add functions while they run (eliminate-dead-code removes them, between passes); a function
// count that differs from what the index has seen rebuilds it, so it never answers stale.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace fusionopt::passes {

class FusedFunctionIndex {
 public:
  // The fused function named `stem` or `stem_<k>` whose body prints as `body_text`, taking the
  // smallest k below the first free name; else null and that free name (`stem`, `stem_1`, ...).
  std::pair<Function*, std::string> FindOrName(Model& model, const std::string& stem, const std::string& body_text);
  // `function`, which the caller has just appended to `model.functions`, whose body prints as
  // `body_text`.
  void Add(const Model& model, Function* function, std::string body_text);

 private:
  void Synchronize(const Model& model);
  size_t FirstFreeSuffix(const std::string& stem);

  size_t functions_seen_ = 0;
  bool built_ = false;
  std::unordered_map<std::string, std::vector<Function*>> by_body_;
  std::unordered_set<std::string> names_;
  std::unordered_map<std::string, size_t> first_free_suffix_;  // every lower suffix of the stem is taken
};

}  // namespace fusionopt::passes
