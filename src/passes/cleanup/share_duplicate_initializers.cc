// share-duplicate-initializers (O1): its rewrite, conditions and limits are in share_duplicate_initializers.h.
#include "passes/cleanup/share_duplicate_initializers.h"

#include <vector>

#include "passes/util/content_hash.h"

namespace fusionopt::passes {

Result<bool> ShareDuplicateInitializers::RunOnGraph(Graph& graph, PassContext& context) {
  bool changed = false;
  TensorContentIndex index;
  std::vector<Value*> initializers = graph.initializers();
  for (Value* initializer : initializers) {
    if (initializer->is_graph_input()) continue;
    Value* kept = index.FindOrAdd(initializer, initializer->initializer());
    if (kept == nullptr) continue;
    if (initializer->is_graph_output()) {
      context.Count("graph_output_duplicates_kept");
      continue;
    }
    uint64_t bytes = initializer->initializer()->nbytes();
    graph.ReplaceAllUses(initializer, kept);
    graph.RemoveInitializer(initializer);
    context.Matched();
    context.Count("initializers_removed");
    context.Count("bytes_saved", static_cast<int64_t>(bytes));
    changed = true;
  }
  return changed;
}

}  // namespace fusionopt::passes
