// Attention as exporters write it, in the IR text form, for the fuse-attention and fused
// attention kernel tests: BERT (three projections, an additive mask), one combined projection
// split three ways (GPT-2's c_attn with its causal mask, or BERT's after
// fuse-horizontal-contractions), ViT (no mask), and [B,H,S,D] operands without head split or
// merge. Two heads of four features: hidden width 8.
#pragma once

#include <string>
#include <utility>

namespace fusionopt::attention_test {

inline const std::string kHeader = "ir_version 8\nopset \"\" 17\n";

// Shape constants the exporters' head-split chains read.
inline const std::string kShapeConstants = R"(
  init int64[] %zero = [0]
  init int64[] %one = [1]
  init int64[1] %axes0 = [0]
  init int64[1] %heads = [2]
  init int64[1] %head_size = [4]
  init int64[1] %width = [8]
)";

// x.view(B, S, 2, 4).permute(perm), the target computed from x's run-time shape.
inline std::string SplitHeads(const std::string& name, const std::string& x, const std::string& perm) {
  return "  %" + name + "_shape = Shape(%" + x + ") @" + name + "_shape\n" +
         "  %" + name + "_b = Gather(%" + name + "_shape, %zero) {axis: 0} @" + name + "_gather_b\n" +
         "  %" + name + "_bu = Unsqueeze(%" + name + "_b, %axes0) @" + name + "_unsqueeze_b\n" +
         "  %" + name + "_s = Gather(%" + name + "_shape, %one) {axis: 0} @" + name + "_gather_s\n" +
         "  %" + name + "_su = Unsqueeze(%" + name + "_s, %axes0) @" + name + "_unsqueeze_s\n" +
         "  %" + name + "_target = Concat(%" + name + "_bu, %" + name + "_su, %heads, %head_size) {axis: 0} @" + name +
         "_concat\n" +
         "  %" + name + "_r = Reshape(%" + x + ", %" + name + "_target) @" + name + "_reshape\n" +
         "  %" + name + "h = Transpose(%" + name + "_r) {perm: " + perm + "} @" + name + "_transpose\n";
}

// context.permute(0, 2, 1, 3).reshape(B, S, 8), the target from the transposed context's shape.
inline std::string MergeHeads(const std::string& context, const std::string& out) {
  return "  %merged = Transpose(%" + context + ") {perm: [0, 2, 1, 3]} @merge_transpose\n" +
         "  %merged_shape = Shape(%merged) @merge_shape\n" +
         "  %merged_b = Gather(%merged_shape, %zero) {axis: 0} @merge_gather_b\n" +
         "  %merged_bu = Unsqueeze(%merged_b, %axes0) @merge_unsqueeze_b\n" +
         "  %merged_s = Gather(%merged_shape, %one) {axis: 0} @merge_gather_s\n" +
         "  %merged_su = Unsqueeze(%merged_s, %axes0) @merge_unsqueeze_s\n" +
         "  %merged_target = Concat(%merged_bu, %merged_su, %width) {axis: 0} @merge_concat\n" +
         "  %" + out + " = Reshape(%merged, %merged_target) @merge_reshape\n";
}

// BERT's self-attention on three projections and an additive [B,1,1,S] mask.
inline std::string Bert(const std::string& scores = "  %scores = Div(%product, %scale) @div\n",
                        const std::string& mask = "float[B,1,1,S] %mask", const std::string& softmax_axis = "-1") {
  return kHeader + "graph main (float[B,S,8] %q, float[B,S,8] %k, float[B,S,8] %v, " + mask +
         ") -> (float[B,S,8] %context)" + kShapeConstants + "  init float[] %scale = [2.0]\n{\n" +
         SplitHeads("k", "k", "[0, 2, 3, 1]") + SplitHeads("v", "v", "[0, 2, 1, 3]") +
         SplitHeads("q", "q", "[0, 2, 1, 3]") + "  %product = MatMul(%qh, %kh) @scores\n" + scores +
         "  %masked = Add(%scores, %mask) @mask\n" + "  %probs = Softmax(%masked) {axis: " + softmax_axis +
         "} @softmax\n" + "  %heads_context = MatMul(%probs, %vh) @context\n" +
         MergeHeads("heads_context", "context") + "}\n";
}

// ViT's self-attention: no mask, the scores scaled by a Mul (the constant first), the softmax
// axis written as 3.
inline std::string Vit() {
  return kHeader + "graph main (float[B,S,8] %q, float[B,S,8] %k, float[B,S,8] %v) -> (float[B,S,8] %context)" +
         kShapeConstants + "  init float[] %scale = [0.5]\n{\n" + SplitHeads("k", "k", "[0, 2, 3, 1]") +
         SplitHeads("v", "v", "[0, 2, 1, 3]") + SplitHeads("q", "q", "[0, 2, 1, 3]") +
         "  %product = MatMul(%qh, %kh) @scores\n  %scores = Mul(%scale, %product) @scale\n" +
         "  %probs = Softmax(%scores) {axis: 3} @softmax\n  %heads_context = MatMul(%probs, %vh) @context\n" +
         MergeHeads("heads_context", "context") + "}\n";
}

// [1,1,n,n] lower-triangular booleans: GPT-2's causal buffer.
inline std::string CausalBuffer(int n) {
  std::string text = "  init bool[1,1," + std::to_string(n) + "," + std::to_string(n) + "] %causal = [";
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) text += std::string(i || j ? ", " : "") + (j <= i ? "1" : "0");
  }
  return text + "]\n";
}

// GPT-2's causal mask: the buffer sliced to [S_k - S_q : S_k, :S_k] with the heads' run-time
// shapes, then Where(allowed, scores, finfo.min).
inline const std::string kCausalMask = R"(  %qh_shape = Shape(%qh) @query_length_shape
  %query_length = Gather(%qh_shape, %two) {axis: 0} @query_length
  %kh_shape = Shape(%kh) @key_length_shape
  %key_length = Gather(%kh_shape, %three) {axis: 0} @key_length
  %offset = Sub(%key_length, %query_length) @offset
  %start = Unsqueeze(%offset, %axes0) @start
  %end = Unsqueeze(%key_length, %axes0) @end
  %rows = Slice(%causal, %start, %end, %axis2, %step) @rows
  %allowed = Slice(%rows, %axes0, %end, %axis3, %step) @allowed
  %masked = Where(%allowed, %scores, %fill) @mask
)";

inline const std::string kCausalConstants = R"(  init int64[] %two = [2]
  init int64[] %three = [3]
  init int64[1] %axis2 = [2]
  init int64[1] %axis3 = [3]
  init int64[1] %step = [1]
  init float[] %fill = [-3.4028235e+38]
)";

// One [B,S,24] projection split three ways (GPT-2's c_attn, or BERT's Q/K/V after
// fuse-horizontal-contractions), the heads' targets read from the Split's outputs; GPT-2's
// causal mask (a buffer of `buffer` positions), or BERT's additive %mask.
inline std::string Combined(bool causal, const std::string& outputs = "float[B,S,8] %context",
                            const std::string& extra = "", int buffer = 8) {
  return kHeader + "graph main (float[B,S,24] %qkv" + (causal ? "" : ", float[B,1,1,S] %mask") + ") -> (" + outputs +
         ")" + kShapeConstants + "  init int64[3] %sizes = [8, 8, 8]\n  init float[] %root = [2.0]\n" +
         (causal ? kCausalConstants + CausalBuffer(buffer) : "") + "{\n" +
         "  %q, %k, %v = Split(%qkv, %sizes) {axis: 2} @split\n" + SplitHeads("q", "q", "[0, 2, 1, 3]") +
         SplitHeads("k", "k", "[0, 2, 3, 1]") + SplitHeads("v", "v", "[0, 2, 1, 3]") +
         "  %product = MatMul(%qh, %kh) @scores\n  %scores = Div(%product, %root) @div\n" +
         (causal ? kCausalMask : "  %masked = Add(%scores, %mask) @mask\n") +
         "  %probs = Softmax(%masked) {axis: -1} @softmax\n  %heads_context = MatMul(%probs, %vh) @context\n" +
         MergeHeads("heads_context", "context") + extra + "}\n";
}

// Attention on [B,H,S,D] tensors (`dims`) with no head split or merge; K transposed inside.
inline std::string HeadsFirst(const std::string& mask_type, const std::string& dims = "1,2,7,4") {
  const std::string heads = "float[" + dims + "]";
  return kHeader + "graph main (" + heads + " %qh, " + heads + " %kh, " + heads + " %vh, float" + mask_type +
         " %mask) -> (float[?,?,?,?] %context)\n  init float[] %scale = [2.0]\n{\n" +
         "  %kt = Transpose(%kh) {perm: [0, 1, 3, 2]} @key_transpose\n" +
         "  %product = MatMul(%qh, %kt) @scores\n  %scores = Div(%product, %scale) @div\n" +
         "  %masked = Add(%mask, %scores) @mask\n  %probs = Softmax(%masked) {axis: -1} @softmax\n" +
         "  %context = MatMul(%probs, %vh) @context\n}\n";
}

// `text` (one of the models above) with `heads` heads of `size` features instead of 2 of 4:
// the head-split constants, the merged width and the projections' widths.
inline std::string WithHeads(std::string text, int heads, int size) {
  const std::string width = std::to_string(heads * size);
  auto replace_all = [&text](const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
      text.replace(at, from.size(), to);
    }
  };
  replace_all("%heads = [2]", "%heads = [" + std::to_string(heads) + "]");
  replace_all("%head_size = [4]", "%head_size = [" + std::to_string(size) + "]");
  replace_all("%width = [8]", "%width = [" + width + "]");
  replace_all("%sizes = [8, 8, 8]", "%sizes = [" + width + ", " + width + ", " + width + "]");
  replace_all("float[B,S,8]", "float[B,S," + width + "]");
  replace_all("float[B,S,24]", "float[B,S," + std::to_string(3 * heads * size) + "]");
  return text;
}

// timm's ViT attention: one qkv projection [B,N,3E] reshaped to [B,N,3,H,D], permuted to
// [3,B,H,N,D] and unbound — the dynamo exporter's Split along axis 0 and a Squeeze per slot.
// `split` is the Split's line (its sizes, or none for even parts); `outputs` the graph outputs.
inline std::string TimmUnbind(const std::string& split = "  %qs0, %ks0, %vs0 = Split(%t) {axis: 0, num_outputs: 3} @unbind\n",
                       const std::string& outputs = "float[2,5,8] %context") {
  return R"(ir_version 8
opset "" 18
graph main (float[2,5,24] %packed) -> ()" + outputs + R"()
  init int64[5] %unflatten = [2, 5, 3, 2, 4]
  init int64[1] %axis0 = [0]
  init int64[3] %thirds = [1, 1, 1]
  init int64[3] %merged = [2, 5, 8]
  init float[] %scale = [0.5]
{
  %u = Reshape(%packed, %unflatten) @unflatten
  %t = Transpose(%u) {perm: [2, 0, 3, 1, 4]} @move
)" + split + R"(  %q = Squeeze(%qs0, %axis0) @q_squeeze
  %k = Squeeze(%ks0, %axis0) @k_squeeze
  %v = Squeeze(%vs0, %axis0) @v_squeeze
  %qm = Mul(%q, %scale) @q_scale
  %kt = Transpose(%k) {perm: [0, 1, 3, 2]} @key_transpose
  %s = MatMul(%qm, %kt) @scores
  %p = Softmax(%s) {axis: -1} @softmax
  %o = MatMul(%p, %v) @context_product
  %ot = Transpose(%o) {perm: [0, 2, 1, 3]} @merge_transpose
  %context = Reshape(%ot, %merged) @merge_reshape
}
)";
}


// Bert() with its inputs' batch and sequence dims unnamed: neither a size nor a symbol.
inline std::string UnnamedBert() {
  std::string text = Bert();
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"float[B,S,8]", "float[?,?,8]"},
                                 {"float[B,1,1,S]", "float[?,1,1,?]"}}) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
      text.replace(at, from.size(), to);
    }
  }
  return text;
}

}  // namespace fusionopt::attention_test
