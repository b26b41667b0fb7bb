// The compact text form of the IR: what `fusionopt --dump` prints and what tests write to
// build graphs. The grammar, with examples, is in docs/ir-text.md.
//
// Printing is canonical: Print(Parse(text)) is the same text for every text the printer
// produced, and Parse(Print(model)) rebuilds the same graph (same names, types, node order,
// attributes, initializers, use lists and model-local functions). What the IR keeps only as
// serialized protobuf residue (doc strings, metadata of values, function overloads) is not
// part of the text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt {

struct PrintOptions {
  // Tensors with more elements print as `<elided N bytes>`, which the parser rejects: a dump
  // stays readable, and a test can never silently lose the weights it meant to write.
  // A negative value prints every tensor in full.
  int64_t max_literal_elements = 16;
};

std::string PrintModel(const Model& model, const PrintOptions& options = {});
std::string PrintGraph(const Graph& graph, const PrintOptions& options = {});

// Errors are InvalidModel statuses reading "line L, column C: <problem>".
Result<std::unique_ptr<Model>> ParseModel(std::string_view text);

}  // namespace fusionopt
