#include "ir/liveness.h"

#include <algorithm>

namespace fusionopt {
namespace {

// Every value read inside `graph` (and its subgraphs) that `graph` does not itself hold.
void ReadFromOutside(const Graph& graph, const std::function<void(const Value*)>& read) {
  for (const auto& node : graph.nodes()) {
    for (const Value* input : node->inputs()) {
      if (input != nullptr && input->graph() != &graph) read(input);
    }
    for (const Graph* subgraph : node->Subgraphs()) {
      ReadFromOutside(*subgraph, [&](const Value* value) {
        if (value->graph() != &graph) read(value);
      });
    }
  }
}

}  // namespace

Liveness::Liveness(const Graph& graph, const AliasRule& aliases) {
  std::vector<const Node*> order;
  for (const auto& node : graph.nodes()) order.push_back(node.get());
  dying_.resize(order.size());
  std::vector<const Value*> met;  // each value once, in the order first met: releases are deterministic
  auto need = [&](const Value* value, size_t position) {
    auto [it, inserted] = last_use_.emplace(value, position);
    if (inserted) met.push_back(value);
    return it;
  };
  for (size_t position = 0; position < order.size(); ++position) {
    auto read = [&](const Value* value) { need(value, position)->second = position; };
    for (const Value* input : order[position]->inputs()) {
      if (input != nullptr) read(input);
    }
    for (const Graph* subgraph : order[position]->Subgraphs()) ReadFromOutside(*subgraph, read);
  }
  for (size_t position = 0; position < order.size(); ++position) {
    for (const Value* output : order[position]->outputs()) {
      if (output != nullptr) need(output, position);  // unread: dies where written
    }
  }
  for (const Value* output : graph.outputs()) need(output, kToTheEnd)->second = kToTheEnd;
  if (aliases) {
    for (auto node = order.rbegin(); node != order.rend(); ++node) {  // a view of a view reaches its root
      const Value* input = (*node)->inputs().empty() ? nullptr : (*node)->input(0);
      if (input == nullptr || !aliases(**node)) continue;
      for (const Value* output : (*node)->outputs()) {
        if (output == nullptr) continue;
        size_t& needed = last_use_[input];
        needed = needed == kToTheEnd || last_use_.at(output) == kToTheEnd ? kToTheEnd
                                                                          : std::max(needed, last_use_.at(output));
      }
    }
  }
  for (const Value* value : met) {
    if (const size_t position = last_use_.at(value); position != kToTheEnd) dying_[position].push_back(value);
  }
}

size_t Liveness::LastUse(const Value& value) const {
  auto found = last_use_.find(&value);
  return found == last_use_.end() ? kToTheEnd : found->second;
}

const std::vector<const Value*>& Liveness::DyingAt(size_t position) const { return dying_.at(position); }

}  // namespace fusionopt
