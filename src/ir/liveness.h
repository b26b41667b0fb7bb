// When each value of a graph is last needed, by node position in the graph's order: the one
// analysis behind buffer reuse in both runtimes (the CPU executor's releases, the CUDA
// session's storage pool).
//
// A value is needed by every node that reads it, a node also reading what its subgraphs read
// from outside them, and by whatever needs a value that shares its storage: where `aliases`
// says a node's outputs are views of its input 0, the input lives as long as they do. Graph
// outputs live to the end; a value nothing reads dies where it is written.
#pragma once

#include <cstddef>
#include <functional>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace fusionopt {

class Liveness {
 public:
  static constexpr size_t kToTheEnd = static_cast<size_t>(-1);
  using AliasRule = std::function<bool(const Node&)>;

  explicit Liveness(const Graph& graph, const AliasRule& aliases = {});

  // The position of the last node that needs `value`; kToTheEnd for a graph output, for a
  // value this graph neither reads nor writes too.
  size_t LastUse(const Value& value) const;
  // The values whose last use is the node at `position`, in the order the analysis met them.
  const std::vector<const Value*>& DyingAt(size_t position) const;

 private:
  std::unordered_map<const Value*, size_t> last_use_;
  std::vector<std::vector<const Value*>> dying_;
};

}  // namespace fusionopt
