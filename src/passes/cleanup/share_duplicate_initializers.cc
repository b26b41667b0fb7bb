// share-duplicate-initializers (O1): one copy of each distinct weight.
//
//   init float[64] %a = [...]                     init float[64] %a = [...]
//   init float[64] %b = (the same bytes)    →     (readers of %b read %a; %b removed)
//
// Initializers are the same when dtype, dims and bytes are (strings element by element).
// Bytes are hashed where they lie — memory-mapped external data is read in place, never
// copied — and only for tensors that share dtype and dims with another one. The first in
// initializer order stays. Counters: initializers_removed, bytes_saved.
//
// Limits: initializers that are graph inputs are part of the interface (a caller may feed
// them) and are neither shared nor removed; a duplicate that is a graph output stays, since
// graph outputs keep their names and distinct values. Sharing is per graph: a subgraph's
// initializers are shared among themselves.
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
