// Shape inference for convolutions, pooling, normalizations and contractions. Expected
// sizes were checked against onnxruntime's actual output shapes.
#include <catch2/catch.hpp>

#include "shape_inference/shape_inference.h"
#include "shape_inference_test_helpers.h"

using namespace fusionopt;
using namespace fusionopt::testing;

namespace {

bool HasWarningContaining(const ShapeInferenceReport& report, const std::string& text) {
  for (const std::string& warning : report.warnings) {
    if (warning.find(text) != std::string::npos) return true;
  }
  return false;
}

Tensor Weights(std::vector<int64_t> dims) {
  int64_t count = 1;
  for (int64_t dim : dims) count *= dim;
  return Tensor::FromValues<float>(DataType::kFloat, std::move(dims),
                                   std::vector<float>(static_cast<size_t>(count), 0.5f));
}

}  // namespace

TEST_CASE("Conv with explicit pads, strides and dilations", "[shape]") {
  TestGraph g;
  Value* x = g.Input("x", DataType::kFloat, "[N,3,9,9]");
  Value* w = g.Initializer("w", Weights({4, 3, 3, 2}));
  // H: (9 + 1 + 2 - 5) / 2 + 1 = 4; W: (9 + 0 + 1 - 2) / 3 + 1 = 3.
  Value* y = g.Apply(
      "Conv", {x, w}, "y",
      {IntsAttr("pads", {1, 0, 2, 1}), IntsAttr("strides", {2, 3}), IntsAttr("dilations", {2, 1})});
  Value* x1d = g.Input("x1d", DataType::kFloat, "[1,2,10]");
  Value* y1d = g.Apply("Conv", {x1d, g.Initializer("w1d", Weights({5, 2, 3}))}, "y1d",
                       {IntsAttr("kernel_shape", {3}), IntsAttr("pads", {1, 1})});
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(y) == "float[N,4,4,3]");
  CHECK(TypeOf(y1d) == "float[1,5,10]");
  CHECK(report.warnings.empty());
}

TEST_CASE("Conv with SAME_UPPER and VALID auto_pad", "[shape]") {
  TestGraph g;
  Value* x = g.Input("x", DataType::kFloat, "[N,3,15,9]");
  Value* same = g.Apply("Conv", {x, g.Initializer("w", Weights({8, 3, 3, 3}))}, "same",
                        {StringAttr("auto_pad", "SAME_UPPER"), IntsAttr("strides", {2, 2})});
  // group 3: each group sees one input channel.
  Value* valid =
      g.Apply("Conv", {x, g.Initializer("wg", Weights({6, 1, 4, 2}))}, "valid",
              {StringAttr("auto_pad", "VALID"), IntAttr("group", 3), IntsAttr("strides", {2, 1})});
  g.Infer();
  CHECK(TypeOf(same) == "float[N,8,8,5]");
  CHECK(TypeOf(valid) == "float[N,6,6,8]");
}

TEST_CASE("Conv negative cases: channel mismatch, window larger than input", "[shape]") {
  TestGraph g;
  Value* x = g.Input("x", DataType::kFloat, "[1,4,3,3]");
  Value* mismatch = g.Apply("Conv", {x, g.Initializer("w", Weights({8, 3, 1, 1}))}, "mismatch");
  Value* too_big = g.Apply("Conv", {x, g.Initializer("big", Weights({8, 4, 5, 5}))}, "too_big");
  Value* symbolic = g.Input("s", DataType::kFloat, "[1,4,H,3]");
  Value* partial =
      g.Apply("Conv", {symbolic, g.Initializer("w3", Weights({2, 4, 3, 3}))}, "partial");
  ShapeInferenceReport report = g.Infer();
  CHECK(HasWarningContaining(report, "input channels 4 do not match weights [8,3,1,1]"));
  CHECK(TypeOf(mismatch) == "float[1,8,3,3]");
  CHECK(HasWarningContaining(report, "window of 5 does not fit padded size 3"));
  CHECK(TypeOf(too_big) == "float[1,8,?,?]");
  CHECK(TypeOf(partial) == "float[1,2,?,1]");  // a symbolic spatial dim becomes unknown
}

TEST_CASE("ConvTranspose with output_padding, group, SAME and output_shape", "[shape]") {
  TestGraph g;
  Value* x = g.Input("x", DataType::kFloat, "[2,3,9,9]");
  Value* w = g.Initializer("w", Weights({3, 2, 4, 4}));
  // 2 * (9 - 1) + output_padding + 4 - 2 = 18 + output_padding.
  Value* padded = g.Apply("ConvTranspose", {x, w}, "padded",
                          {IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1}),
                           IntsAttr("output_padding", {1, 0}), IntAttr("group", 3)});
  Value* same = g.Apply("ConvTranspose", {x, w}, "same",
                        {IntsAttr("strides", {2, 3}), StringAttr("auto_pad", "SAME_UPPER")});
  Value* explicit_shape =
      g.Apply("ConvTranspose", {x, w}, "explicit",
              {IntsAttr("strides", {2, 2}), IntsAttr("output_shape", {19, 20})});
  g.Infer();
  CHECK(TypeOf(padded) == "float[2,6,19,18]");
  CHECK(TypeOf(same) == "float[2,2,18,27]");
  CHECK(TypeOf(explicit_shape) == "float[2,2,19,20]");
}

TEST_CASE("MaxPool ceil_mode rounds up but drops a window starting in the padding", "[shape]") {
  TestGraph g(12);
  Value* x = g.Input("x", DataType::kFloat, "[1,1,6,4]");
  auto pool = [&](const std::string& name, int64_t ceil_mode) {
    return g.Op("MaxPool", {x}, {name, name + "_indices"},
                {IntsAttr("kernel_shape", {3, 2}), IntsAttr("strides", {2, 2}),
                 IntsAttr("pads", {0, 0, 0, 1}), IntAttr("ceil_mode", ceil_mode)});
  };
  Node* floor_pool = pool("floor", 0);
  Node* ceil_pool = pool("ceil", 1);
  g.Infer();
  // H: (6 - 3) / 2 = 1.5 -> 2 windows (floor) or 3 (ceil).
  // W: (4 + 1 - 2) / 2 = 1.5 -> 2 or 3, but the third window would start at 4, in the
  // padding, so ceil_mode keeps 2 (as onnxruntime does).
  CHECK(TypeOf(floor_pool->output(0)) == "float[1,1,2,2]");
  CHECK(TypeOf(ceil_pool->output(0)) == "float[1,1,3,2]");
  CHECK(TypeOf(ceil_pool->output(1)) == "int64[1,1,3,2]");
}

TEST_CASE("MaxPool and AveragePool with SAME_UPPER, global pools", "[shape]") {
  TestGraph g(19);
  Value* x = g.Input("x", DataType::kFloat, "[N,8,7,7]");
  Node* max_pool = g.Op("MaxPool", {x}, {"max", "indices"},
                        {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2}),
                         StringAttr("auto_pad", "SAME_UPPER")});
  Value* average = g.Apply("AveragePool", {x}, "average",
                           {IntsAttr("kernel_shape", {2, 2}), IntsAttr("dilations", {2, 1})});
  Value* global = g.Apply("GlobalAveragePool", {x}, "global");
  Value* global_max = g.Apply("GlobalMaxPool", {x}, "global_max");
  Value* missing_kernel = g.Apply("AveragePool", {x}, "missing_kernel");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(max_pool->output(0)) == "float[N,8,4,4]");
  CHECK(TypeOf(max_pool->output(1)) == "int64[N,8,4,4]");
  CHECK(TypeOf(average) == "float[N,8,5,6]");
  CHECK(TypeOf(global) == "float[N,8,1,1]");
  CHECK(TypeOf(global_max) == "float[N,8,1,1]");
  CHECK(TypeOf(missing_kernel) == "float[N,8,?,?]");
  CHECK(HasWarningContaining(report, "attribute 'kernel_shape' is required"));
}

TEST_CASE("BatchNormalization statistics outputs differ between opset 9 and 15", "[shape]") {
  for (int64_t opset : {9, 15}) {
    TestGraph g(opset);
    Value* x = g.Input("x", DataType::kFloat, "[N,3,5,5]");
    std::vector<Value*> inputs{x};
    for (const char* name : {"scale", "bias", "mean", "var"}) {
      inputs.push_back(g.Initializer(name, FloatVector({1, 1, 1})));
    }
    std::vector<std::string> outputs{"y", "running_mean", "running_var"};
    if (opset < 14) outputs.insert(outputs.end(), {"saved_mean", "saved_var"});
    Node* bn = g.Op("BatchNormalization", inputs, outputs);
    g.Infer();
    CHECK(TypeOf(bn->output(0)) == "float[N,3,5,5]");
    for (size_t i = 1; i < outputs.size(); ++i) CHECK(TypeOf(bn->output(i)) == "float[3]");
  }
}

TEST_CASE("LayerNormalization statistics keep leading dims; other norms keep X", "[shape]") {
  TestGraph g(21);
  Value* x = g.Input("x", DataType::kFloat16, "[B,S,8,8]");
  Value* scale = g.Input("scale", DataType::kFloat16, "[8,8]");
  Node* ln = g.Op("LayerNormalization", {x, scale}, {"y", "mean", "inv_std"}, {IntAttr("axis", 2)});
  Value* group =
      g.Apply("GroupNormalization", {x, scale, scale}, "group", {IntAttr("num_groups", 2)});
  Value* instance = g.Apply("InstanceNormalization", {x, scale, scale}, "instance");
  Node* bad_axis = g.Op("LayerNormalization", {x, scale}, {"y2", "mean2"}, {IntAttr("axis", 4)});
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(ln->output(0)) == "float16[B,S,8,8]");
  CHECK(TypeOf(ln->output(1)) == "float[B,S,1,1]");  // stash_type defaults to float
  CHECK(TypeOf(ln->output(2)) == "float[B,S,1,1]");
  CHECK(TypeOf(group) == "float16[B,S,8,8]");
  CHECK(TypeOf(instance) == "float16[B,S,8,8]");
  CHECK(TypeOf(bad_axis->output(1)) == "float[*]");
  CHECK(HasWarningContaining(report, "axis 4 is out of range for rank 4"));
}

TEST_CASE("MatMul broadcasts batch dims and handles 1-D operands", "[shape]") {
  TestGraph g;
  Value* a = g.Input("a", DataType::kFloat, "[2,1,S,4]");
  Value* b = g.Input("b", DataType::kFloat, "[5,4,6]");
  Value* vector = g.Input("v", DataType::kFloat, "[4]");
  Value* batched = g.Apply("MatMul", {a, b}, "batched");
  Value* left_vector = g.Apply("MatMul", {vector, b}, "left_vector");
  Value* right_vector = g.Apply("MatMul", {a, vector}, "right_vector");
  Value* dot = g.Apply("MatMul", {vector, vector}, "dot");
  Value* wrong_k = g.Apply("MatMul", {b, b}, "wrong_k");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(batched) == "float[2,5,S,6]");
  CHECK(TypeOf(left_vector) == "float[5,6]");
  CHECK(TypeOf(right_vector) == "float[2,1,S]");
  CHECK(TypeOf(dot) == "float[]");
  CHECK(TypeOf(wrong_k) == "float[*]");
  CHECK(HasWarningContaining(report, "inner dims differ: [5,4,6] x [5,4,6]"));
}

TEST_CASE("Gemm honours transA and transB", "[shape]") {
  TestGraph g;
  Value* a = g.Input("a", DataType::kFloat, "[4,M]");
  Value* b = g.Input("b", DataType::kFloat, "[5,4]");
  Value* c = g.Input("c", DataType::kFloat, "[5]");
  Value* y = g.Apply("Gemm", {a, b, c}, "y", {IntAttr("transA", 1), IntAttr("transB", 1)});
  Value* plain = g.Apply("Gemm", {a, a}, "plain", {IntAttr("transA", 1)});  // A^T A
  Value* bad = g.Apply("Gemm", {b, b}, "bad");  // [5,4] x [5,4]: 4 against 5
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(y) == "float[M,5]");
  CHECK(TypeOf(plain) == "float[M,M]");
  CHECK(TypeOf(bad) == "float[*]");
  CHECK(HasWarningContaining(report, "inner dims differ: [5,4] x [5,4]"));
}

TEST_CASE("Einsum with explicit and implicit outputs", "[shape]") {
  TestGraph g(12);
  Value* a = g.Input("a", DataType::kFloat, "[B,3,4]");
  Value* b = g.Input("b", DataType::kFloat, "[B,4,5]");
  Value* batched = g.Input("batched", DataType::kFloat, "[7,2,3,4]");
  Value* matrix = g.Input("matrix", DataType::kFloat, "[4,5]");
  Value* square = g.Input("square", DataType::kFloat, "[3,3]");
  Value* bmm = g.Apply("Einsum", {a, b}, "bmm", {StringAttr("equation", "bij,bjk->bik")});
  Value* implicit =
      g.Apply("Einsum", {batched, matrix}, "implicit", {StringAttr("equation", "...ij,jk")});
  Value* diagonal = g.Apply("Einsum", {square}, "diagonal", {StringAttr("equation", "ii->i")});
  Value* clash = g.Apply("Einsum", {a, a}, "clash", {StringAttr("equation", "bij,bij->ij")});
  Value* wrong = g.Apply("Einsum", {a, matrix}, "wrong", {StringAttr("equation", "bij,kj->bik")});
  Value* misfit = g.Apply("Einsum", {a, matrix}, "misfit", {StringAttr("equation", "ij,jk")});
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(bmm) == "float[B,3,5]");
  CHECK(TypeOf(implicit) == "float[7,2,3,5]");
  CHECK(TypeOf(diagonal) == "float[3]");
  CHECK(TypeOf(clash) == "float[3,4]");
  CHECK(TypeOf(wrong) == "float[*]");
  CHECK(HasWarningContaining(report, "subscript 'j' has sizes 4 and 5"));
  CHECK(TypeOf(misfit) == "float[*]");
  CHECK(HasWarningContaining(report, "term 'ij' does not fit input shape [B,3,4]"));
}

TEST_CASE("Quantization ops: types from the zero points, shapes from the float ops' rules", "[shape][quantized]") {
  TestGraph g(21);
  g.ImportOpset("com.microsoft", 1);
  Value* x = g.Input("x", DataType::kFloat, "[batch,4,8,8]");
  Value* scale = g.Input("scale", DataType::kFloat, "[]");
  Value* zero = g.Input("zero", DataType::kInt8, "[]");
  Value* w = g.Input("w", DataType::kInt8, "[6,4,3,3]");
  Value* a = g.Input("a", DataType::kUint8, "[batch,16,32]");
  Value* b = g.Input("b", DataType::kInt8, "[32,10]");
  Node* quantize = g.Op("QuantizeLinear", {x, scale, zero}, {"q"});
  Node* default_type = g.Op("QuantizeLinear", {x, scale}, {"q_default"});
  Node* int4 = g.Op("QuantizeLinear", {x, scale}, {"q4"}, {IntAttr("output_dtype", 22)});
  Node* dequantize = g.Op("DequantizeLinear", {quantize->output(0), scale, zero}, {"dq"});
  Node* dynamic = g.Op("DynamicQuantizeLinear", {x}, {"dy", "dy_scale", "dy_zero"});
  Node* conv = g.Op("QLinearConv", {quantize->output(0), scale, zero, w, scale, zero, scale, zero}, {"qconv"},
                    {IntsAttr("pads", {1, 1, 1, 1})});
  Node* integer = g.Op("MatMulInteger", {a, b}, {"mmi"});
  Node* to_float = g.Op("MatMulIntegerToFloat", {a, b, scale, scale}, {"mmf"}, {}, "com.microsoft");
  Node* gemm = g.Op("QGemm", {g.Input("ga", DataType::kUint8, "[5,32]"), scale, zero, b, scale, zero}, {"qgemm"}, {},
                    "com.microsoft");
  Node* nbits = g.Op("MatMulNBits", {g.Input("fa", DataType::kFloat, "[batch,32]"), b, scale}, {"nbits"},
                     {IntAttr("K", 32), IntAttr("N", 48), IntAttr("block_size", 32)}, "com.microsoft");
  Node* concat = g.Op("QLinearConcat", {scale, zero, a, scale, zero, a, scale, zero}, {"qcat"}, {IntAttr("axis", 1)},
                      "com.microsoft");
  Node* pool = g.Op("QLinearGlobalAveragePool", {quantize->output(0), scale, zero, scale, zero}, {"gap"},
                    {IntAttr("channels_last", 1)}, "com.microsoft");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(quantize->output(0)) == "int8[batch,4,8,8]");
  CHECK(TypeOf(default_type->output(0)) == "uint8[batch,4,8,8]");
  CHECK(TypeOf(int4->output(0)) == "int4[batch,4,8,8]");
  CHECK(TypeOf(dequantize->output(0)) == "float[batch,4,8,8]");
  CHECK(TypeOf(dynamic->output(0)) == "uint8[batch,4,8,8]");
  CHECK(TypeOf(dynamic->output(1)) == "float[]");
  CHECK(TypeOf(conv->output(0)) == "int8[batch,6,8,8]");
  CHECK(TypeOf(integer->output(0)) == "int32[batch,16,10]");
  CHECK(TypeOf(to_float->output(0)) == "float[batch,16,10]");
  CHECK(TypeOf(gemm->output(0)) == "float[5,10]");
  CHECK(TypeOf(nbits->output(0)) == "float[batch,48]");
  CHECK(TypeOf(concat->output(0)) == "int8[batch,32,32]");
  // channels_last: (N, spatial..., C) = [batch, 4, 8, 8] pools its middle axes.
  CHECK(TypeOf(pool->output(0)) == "int8[batch,1,1,8]");
  CHECK(report.unsupported_ops.empty());
}
