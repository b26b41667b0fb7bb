#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// fuse-elementwise (O2): connected producer→consumer groups of elementwise ops become one
// ai.fusionopt node that the elementwise engine evaluates in a single tiled pass.
inline constexpr std::string_view kFuseElementwiseRewrite = R"rewrite(
  %t = Mul(%x, %scale)    float[N,C]
  %u = Add(%t, %bias)     float[N,C]    →   %y = ai.fusionopt::FusedElementwise_Mul_Add_Relu(%x, %scale, %bias)
  %y = Relu(%u)           float[N,C]
)rewrite";
// Members: elementwise ops of the default domain that the engine evaluates
// (elementwise_support.h: dtypes, op table, opset >= 7).
//
// Shapes: the engine evaluates every register at one index space — the broadcast of the
// group's inputs — and stores every output there. The rule that makes this exact: all values
// the group writes provably have one shape S (shape_facts.h: equal dims or symbols, or derived
// through the graph; '?' alone proves nothing, so such groups are cut rather than guessed).
// Then the index space is S: every input feeds a member that some output depends on, and an
// elementwise op's output contains its inputs' broadcast. A smaller member read only inside —
// a [1,C] Add feeding an [N,C] Mul — is recomputed per element of S; exact, because elementwise
// ops commute with broadcasting, and a few ops per element cost less than the launch and the
// round trip through memory they replace. A smaller value that is also read outside cannot be
// stored per element of S: the group is cut there.
//
// Intermediates with several readers: when every reader is in the group, nothing to do. When
// some are outside, the value becomes an extra output of the fused node: one write of the
// tensor inside the pass that computes it anyway. Cutting the group there costs the same write
// plus a launch and a read back, and recomputing it helps only an outside reader that is itself
// a fused group that could not take the producer — so the extra output is never worse, and the
// group is cut only when the value's shape is not S or the max-outputs cap is reached.
// The exception is a dequantized 8-bit value whose bytes the group hands on anyway: readers in
// other groups dequantize the bytes themselves with a copy of the DequantizeLinear (one byte an
// element read instead of four written and read), where their groups stay legal.
//
// Growth: nodes are visited in graph order; each joins its producers' groups — all of them at
// once when the union is legal, else one at a time in input order — and a union is legal when
// it stays within the caps, its outputs share one shape, and it is convex (no path leaves it and comes
// back, which would make the fused node depend on itself). Every state is checked as it stands,
// with not-yet-visited readers counted as outside, so a finished group is legal whatever its
// later neighbours do. A lone op is not fused: one kernel either way.
//
// Caps (options): max-ops 32, max-inputs 16 (distinct tensors read; scalar constants are
// compiled into the body and do not count), max-outputs 4. The engine keeps one 512-element
// tile of 8-byte lanes per register: 32 ops plus 16 inputs is about 48 registers, 192 KiB per
// thread, which stays in L2; beyond that every instruction of the tile reaches out to L3, and
// the traffic that fusion saves is paid back.
//
// Limits: a merge that would be legal only after a later node joins is refused (a [1,C] value
// read by two [N,C] ops stays a group of its own, computed once, rather than recomputed in
// both). Groups are decided on the graph as it was; outlining one can make a later one
// non-convex, and that one is then reported and left alone.
class FuseElementwise : public Pass {
 public:
  std::string_view rewrite() const override { return kFuseElementwiseRewrite; }
  std::string_view name() const override { return "fuse-elementwise"; }
  std::string_view summary() const override {
    return "fuse connected elementwise ops (broadcasting included) into one single-pass kernel";
  }
  std::vector<PassOptionInfo> options() const override;

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
