// Dtype and shape inference over the graph IR, with symbolic dims.
//
// Inference merges into what the model already declares: it fills in an undefined dtype, an
// unknown rank or unknown dims, and never replaces a declared known dim or declared symbol
// (except ONNX's generated placeholders "unk__N", which a proven size or symbol refines).
// A disagreement (declared 5, inferred 7) keeps the declared value and becomes a warning.
// Inference never fails: an op without a rule keeps whatever its value_info declared and is
// listed in the report, so a caller can decide whether that matters for what it does next.
//
// Small integer tensors that describe shapes (Shape → Gather → Unsqueeze → Concat, as
// PyTorch exports emit them) are tracked element by element, symbols included, so a
// Reshape fed by such a chain gets a symbolic output shape like [batch, seq, 4, 16].
// docs/ops.md lists every op with a rule and what the rule knows.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace fusionopt {

// A small integer tensor's content, every element known.
struct KnownIntegers {
  bool scalar = false;  // rank 0; otherwise rank 1
  std::vector<int64_t> values;
};

struct ShapeInferenceReport {
  // "domain::OpType@opset" of ops seen without an inference rule (unique, sorted); the
  // default domain is spelled "ai.onnx", a domain without opset import gets "@?".
  std::vector<std::string> unsupported_ops;
  // Conflicts and malformed inputs, e.g. "node '/a/Add': input shapes [3] and [4] do not
  // broadcast". Never fatal.
  std::vector<std::string> warnings;
  // Values whose type became (more) known: dtype, rank or at least one dim.
  int64_t values_inferred = 0;
  // Small integer tensors (rank 0 or 1) whose every element inference knows — shape arithmetic
  // at known sizes, by value name: what a Reshape target or a Split's sizes will be.
  std::map<std::string, KnownIntegers> known_integers;
  // The one fatal finding: a model-local function that calls itself, directly or through
  // others (InvalidModel, naming the chain). Everything else is still inferred.
  Status error;
};

// The main graph and, recursively, every subgraph (If/Loop/Scan bodies). A node that calls a
// model-local function gets its outputs' types by inferring the function's body with the
// node's argument types and attributes, on a copy: the function itself stays untyped, since
// each call may give it different types.
ShapeInferenceReport InferShapes(Model& model);
// The main graph's computed values inferred afresh from its inputs and initializers: every node
// output's shape is forgotten first, then InferShapes runs. For a caller that has just sized the
// inputs' symbolic dims: the shapes a model declares for its intermediates (dynamo exports declare
// every one with the model's symbols) would otherwise stay, since inference never replaces a
// declared symbol. Graph outputs are re-inferred too.
ShapeInferenceReport ReinferShapes(Model& model);

// One graph (and its subgraphs), using `model` for opset versions.
ShapeInferenceReport InferShapes(Graph& graph, const Model& model);

// Numpy (multidirectional) broadcasting of two shapes, aligned from the right.
// Per dim pair: 1 and d -> d; equal -> that dim; a known d against a symbol or unknown -> d
// (the other side must be d or 1); two different symbols, or a symbol against an unknown ->
// unknown. Returns nullopt when two known dims differ and neither is 1.
std::optional<Shape> BroadcastShapes(const Shape& a, const Shape& b);

}  // namespace fusionopt
