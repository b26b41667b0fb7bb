// Shape inference for layout, slicing, indexing, generator and resize ops.
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

constexpr int64_t kInt64Max = 9223372036854775807;

}  // namespace

TEST_CASE("Slice with inputs: negative starts, reverse steps, open ends", "[shape]") {
  TestGraph g(13);
  Value* x = g.Input("x", DataType::kFloat, "[N,3,9,9]");
  // axis 1: [1:] -> 2; axis 2: [-1::-2] over 9 -> 5; axis 3: [0:100:4] -> 3.
  Value* y = g.Apply("Slice",
                     {x, g.Ints("starts", {1, -1, 0}), g.Ints("ends", {kInt64Max, -kInt64Max, 100}),
                      g.Ints("axes", {1, 2, -1}), g.Ints("steps", {1, -2, 4})},
                     "y");
  // The whole of a symbolic dim stays symbolic; part of it becomes unknown.
  Value* whole = g.Apply("Slice", {x, g.Ints("s0", {0}), g.Ints("e0", {kInt64Max})}, "whole");
  Value* part = g.Apply("Slice", {x, g.Ints("s1", {1}), g.Ints("e1", {kInt64Max})}, "part");
  Value* starts = g.Input("computed_starts", DataType::kInt64, "[1]");
  Value* computed = g.Apply("Slice", {x, starts, g.Ints("e2", {2}), g.Ints("a2", {3})}, "computed");
  // Without axes, the starts' length says which leading axes are sliced.
  Value* leading = g.Apply("Slice", {x, starts, g.Ints("e4", {2})}, "leading");
  Value* zero_step = g.Apply(
      "Slice", {x, g.Ints("s3", {0}), g.Ints("e3", {2}), g.Ints("a3", {1}), g.Ints("t3", {0})},
      "zero_step");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(y) == "float[N,2,5,3]");
  CHECK(TypeOf(whole) == "float[N,3,9,9]");
  CHECK(TypeOf(part) == "float[?,3,9,9]");
  CHECK(TypeOf(computed) == "float[N,3,9,?]");
  CHECK(TypeOf(leading) == "float[?,3,9,9]");
  CHECK(TypeOf(zero_step) == "float[*]");
  CHECK(HasWarningContaining(report, "step 0 is invalid"));
}

TEST_CASE("Slice before opset 10 takes attributes", "[shape]") {
  TestGraph g(9);
  Value* x = g.Input("x", DataType::kFloat, "[2,3,9,9]");
  Value* y =
      g.Apply("Slice", {x}, "y",
              {IntsAttr("starts", {1, 2}), IntsAttr("ends", {3, -1}), IntsAttr("axes", {2, 3})});
  g.Infer();
  CHECK(TypeOf(y) == "float[2,3,2,6]");
}

TEST_CASE("Concat sums the axis and merges the other dims", "[shape]") {
  TestGraph g;
  Value* a = g.Input("a", DataType::kFloat, "[?,seq,4]");
  Value* b = g.Input("b", DataType::kFloat, "[2,seq,6]");
  Value* c = g.Input("c", DataType::kFloat, "[2,3]");
  Value* unknown_rank = g.Input("d", DataType::kFloat, "");
  Value* joined = g.Apply("Concat", {a, b}, "joined", {IntAttr("axis", -1)});
  Value* partial = g.Apply("Concat", {b, unknown_rank}, "partial", {IntAttr("axis", 2)});
  Value* mismatch = g.Apply("Concat", {a, c}, "mismatch", {IntAttr("axis", 0)});
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(joined) == "float[2,seq,10]");
  CHECK(TypeOf(partial) == "float[2,seq,?]");
  CHECK(TypeOf(mismatch) == "float[*]");
  CHECK(HasWarningContaining(report, "inputs have different ranks"));
}

TEST_CASE("Pad: attribute before 11, input from 11, axes input from 18", "[shape]") {
  {
    TestGraph g(10);
    Value* x = g.Input("x", DataType::kFloat, "[N,3,9,9]");
    Value* y = g.Apply("Pad", {x}, "y", {IntsAttr("pads", {0, 0, 1, 1, 0, 0, 1, 1})});
    g.Infer();
    CHECK(TypeOf(y) == "float[N,3,11,11]");
  }
  {
    TestGraph g(18);
    Value* x = g.Input("x", DataType::kFloat, "[N,3,9,9]");
    Value* full = g.Apply("Pad", {x, g.Ints("pads", {0, 1, 2, 3, 0, 1, -1, 0})}, "full");
    Value* by_axes =
        g.Apply("Pad", {x, g.Ints("p2", {1, 2, 3, 4}), nullptr, g.Ints("axes", {3, 1})}, "by_axes");
    Value* computed = g.Apply("Pad", {x, g.Input("pads_in", DataType::kInt64, "[8]")}, "computed");
    Value* wrong = g.Apply("Pad", {x, g.Ints("p3", {1, 1})}, "wrong");
    ShapeInferenceReport report = g.Infer();
    CHECK(TypeOf(full) == "float[N,5,10,12]");
    CHECK(TypeOf(by_axes) == "float[N,9,9,13]");
    CHECK(TypeOf(computed) == "float[?,?,?,?]");
    CHECK(TypeOf(wrong) == "float[*]");
    CHECK(HasWarningContaining(report, "pads has 2 values for 4 axes"));
  }
}

TEST_CASE("Expand and Tile", "[shape]") {
  TestGraph g;
  Value* x = g.Input("x", DataType::kFloat, "[3,1]");
  Value* expanded = g.Apply("Expand", {x, g.Ints("shape", {2, 1, 6})}, "expanded");
  Value* like = g.Input("like", DataType::kFloat, "[batch,3,seq]");
  Value* follow = g.Apply("Expand", {x, g.Apply("Shape", {like}, "like_shape")}, "follow");
  Value* bad = g.Apply("Expand", {x, g.Ints("bad_shape", {4, 6})}, "bad");
  Value* tiled = g.Apply("Tile", {like, g.Ints("repeats", {1, 2, 3})}, "tiled");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(expanded) == "float[2,3,6]");
  CHECK(TypeOf(follow) == "float[batch,3,seq]");
  CHECK(TypeOf(bad) == "float[*]");
  CHECK(HasWarningContaining(report, "input shape [3,1] cannot expand to [4,6]"));
  CHECK(TypeOf(tiled) == "float[batch,6,3*seq]");  // a product of dims is a symbol of its own
}

TEST_CASE("Transpose, Flatten, DepthToSpace and SpaceToDepth", "[shape]") {
  TestGraph g;
  Value* x = g.Input("x", DataType::kFloat, "[N,8,3,4]");
  Value* reversed = g.Apply("Transpose", {x}, "reversed");
  Value* bad_perm = g.Apply("Transpose", {x}, "bad_perm", {IntsAttr("perm", {0, 1, 1, 2})});
  Value* flat = g.Apply("Flatten", {x}, "flat");
  Value* flat_last = g.Apply("Flatten", {x}, "flat_last", {IntAttr("axis", -1)});
  Value* flat_all = g.Apply("Flatten", {x}, "flat_all", {IntAttr("axis", 0)});
  Value* to_space = g.Apply("DepthToSpace", {x}, "to_space", {IntAttr("blocksize", 2)});
  Value* to_depth = g.Apply("SpaceToDepth", {to_space}, "to_depth", {IntAttr("blocksize", 2)});
  Value* indivisible = g.Apply("SpaceToDepth", {x}, "indivisible", {IntAttr("blocksize", 3)});
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(reversed) == "float[4,3,8,N]");
  CHECK(TypeOf(bad_perm) == "float[*]");
  CHECK(HasWarningContaining(report, "perm is not a permutation"));
  CHECK(TypeOf(flat) == "float[N,96]");
  CHECK(TypeOf(flat_last) == "float[24*N,4]");
  CHECK(TypeOf(flat_all) == "float[1,96*N]");
  CHECK(TypeOf(to_space) == "float[N,2,6,8]");
  CHECK(TypeOf(to_depth) == "float[N,8,3,4]");
  CHECK(TypeOf(indivisible) == "float[N,72,1,?]");
  CHECK(HasWarningContaining(report, "size 4 is not divisible by 3"));
}

TEST_CASE("Gather, GatherElements, GatherND and scatters", "[shape]") {
  TestGraph g;
  Value* x = g.Input("x", DataType::kFloat, "[N,3,9]");
  Value* indices = g.Input("indices", DataType::kInt64, "[2,5]");
  Value* gathered = g.Apply("Gather", {x, indices}, "gathered", {IntAttr("axis", 1)});
  Value* scalar = g.Apply("Gather", {x, g.Initializer("i", Int64Tensor({1}, {}))}, "scalar",
                          {IntAttr("axis", -1)});
  Value* bad_axis = g.Apply("Gather", {x, indices}, "bad_axis", {IntAttr("axis", 3)});
  Value* elements =
      g.Apply("GatherElements", {x, g.Input("ei", DataType::kInt64, "[N,3,2]")}, "elements");
  Value* data = g.Input("data", DataType::kFloat, "[2,3,4,5]");
  Value* nd = g.Apply("GatherND", {data, g.Input("ndi", DataType::kInt64, "[2,6,2]")}, "nd",
                      {IntAttr("batch_dims", 1)});
  Value* scattered = g.Apply(
      "ScatterND",
      {data, g.Input("si", DataType::kInt64, "[1,4]"), g.Input("su", DataType::kFloat, "[1]")},
      "scattered");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(gathered) == "float[N,2,5,9]");
  CHECK(TypeOf(scalar) == "float[N,3]");
  CHECK(TypeOf(bad_axis) == "float[*]");
  CHECK(HasWarningContaining(report, "axis 3 is out of range for rank 3"));
  CHECK(TypeOf(elements) == "float[N,3,2]");
  CHECK(TypeOf(nd) == "float[2,6,5]");
  CHECK(TypeOf(scattered) == "float[2,3,4,5]");
}

TEST_CASE("TopK takes k as an attribute before opset 10 and as an input after", "[shape]") {
  {
    TestGraph g(9);
    Value* x = g.Input("x", DataType::kFloat, "[N,10]");
    Node* top = g.Op("TopK", {x}, {"values", "indices"}, {IntAttr("k", 3)});
    g.Infer();
    CHECK(TypeOf(top->output(0)) == "float[N,3]");
    CHECK(TypeOf(top->output(1)) == "int64[N,3]");
  }
  {
    TestGraph g(11);
    Value* x = g.Input("x", DataType::kFloat, "[N,10]");
    Node* top = g.Op("TopK", {x, g.Ints("k", {4})}, {"values", "indices"}, {IntAttr("axis", 0)});
    Node* computed = g.Op("TopK", {x, g.Input("k_in", DataType::kInt64, "[1]")}, {"v2", "i2"});
    Node* too_many = g.Op("TopK", {x, g.Ints("k_big", {11})}, {"v3", "i3"});
    ShapeInferenceReport report = g.Infer();
    CHECK(TypeOf(top->output(0)) == "float[4,10]");
    CHECK(TypeOf(computed->output(1)) == "int64[N,?]");
    CHECK(TypeOf(too_many->output(0)) == "float[*]");
    CHECK(HasWarningContaining(report, "k = 11 exceeds the axis size 10"));
  }
}

TEST_CASE("OneHot inserts the depth axis; NonZero has rank rows", "[shape]") {
  TestGraph g(11);
  Value* indices = g.Input("indices", DataType::kInt64, "[2,3]");
  Value* depth = g.Initializer("depth", Tensor::FromValues<float>(DataType::kFloat, {}, {7.0f}));
  Value* values = g.Initializer("values", FloatVector({0, 1}));
  Value* one_hot = g.Apply("OneHot", {indices, depth, values}, "one_hot", {IntAttr("axis", 1)});
  Value* appended = g.Apply("OneHot", {indices, depth, values}, "appended");
  Value* nonzero = g.Apply("NonZero", {g.Input("x", DataType::kFloat, "[4,5,6]")}, "nonzero");
  g.Infer();
  CHECK(TypeOf(one_hot) == "float[2,7,3]");
  CHECK(TypeOf(appended) == "float[2,3,7]");
  CHECK(TypeOf(nonzero) == "int64[3,?]");
}

TEST_CASE("Constant, ConstantOfShape, Range, EyeLike, Size", "[shape]") {
  TestGraph g(13);
  Value* ints = g.Op("Constant", {}, {"ints"}, {IntsAttr("value_ints", {1, 2, 3})})->output(0);
  Value* tensor =
      g.Op("Constant", {}, {"tensor"},
           {TensorAttr("value", Tensor::FromValues<float>(DataType::kFloat, {2, 2}, {1, 2, 3, 4}))})
          ->output(0);
  Value* filled =
      g.Apply("ConstantOfShape", {g.Ints("shape", {2, 3})}, "filled",
              {TensorAttr("value", Tensor::FromValues<int32_t>(DataType::kInt32, {1}, {1}))});
  Value* default_fill = g.Apply("ConstantOfShape", {ints}, "default_fill");
  auto scalar_float = [](float value) {
    return Tensor::FromValues<float>(DataType::kFloat, {}, {value});
  };
  Value* range =
      g.Apply("Range",
              {g.Initializer("r0", scalar_float(1)), g.Initializer("r1", scalar_float(9.5f)),
               g.Initializer("r2", scalar_float(2))},
              "range");
  Value* x = g.Input("x", DataType::kFloat, "[batch,seq]");
  Value* seq = g.Apply(
      "Gather", {g.Apply("Shape", {x}, "shape_x"), g.Initializer("one", Int64Tensor({1}, {}))},
      "seq");
  Value* positions = g.Apply("Range",
                             {g.Initializer("zero", Int64Tensor({0}, {})), seq,
                              g.Initializer("step", Int64Tensor({1}, {}))},
                             "positions");
  Value* eye = g.Apply("EyeLike", {x}, "eye", {IntAttr("dtype", 11)});
  Value* size = g.Apply("Size", {x}, "size");
  g.Infer();
  CHECK(TypeOf(ints) == "int64[3]");
  CHECK(TypeOf(tensor) == "float[2,2]");
  CHECK(TypeOf(filled) == "int32[2,3]");
  CHECK(TypeOf(default_fill) == "float[1,2,3]");
  CHECK(TypeOf(range) == "float[5]");
  CHECK(TypeOf(positions) == "int64[seq]");
  CHECK(TypeOf(eye) == "double[batch,seq]");
  CHECK(TypeOf(size) == "int64[]");
}

TEST_CASE("Resize by scales, sizes and keep_aspect_ratio_policy; Upsample by opset", "[shape]") {
  TestGraph g(18);
  Value* x = g.Input("x", DataType::kFloat, "[N,3,9,9]");
  Value* by_scales =
      g.Apply("Resize", {x, nullptr, g.Initializer("scales", FloatVector({1, 1, 1.5f, 0.7f}))},
              "by_scales");
  Value* by_sizes =
      g.Apply("Resize", {x, nullptr, nullptr, g.Ints("sizes", {2, 3, 5, 17})}, "by_sizes");
  Value* not_larger =
      g.Apply("Resize", {x, nullptr, nullptr, g.Ints("axes_sizes", {5, 17})}, "not_larger",
              {IntsAttr("axes", {3, 2}), StringAttr("keep_aspect_ratio_policy", "not_larger")});
  Value* not_smaller =
      g.Apply("Resize", {x, nullptr, nullptr, g.Ints("axes_sizes2", {5, 17})}, "not_smaller",
              {IntsAttr("axes", {3, 2}), StringAttr("keep_aspect_ratio_policy", "not_smaller")});
  Value* computed =
      g.Apply("Resize", {x, nullptr, g.Input("s_in", DataType::kFloat, "[4]")}, "computed");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(by_scales) == "float[N,3,13,6]");
  CHECK(TypeOf(by_sizes) == "float[2,3,5,17]");
  CHECK(TypeOf(not_larger) == "float[N,3,5,5]");
  CHECK(TypeOf(not_smaller) == "float[N,3,17,17]");
  CHECK(TypeOf(computed) == "float[?,?,?,?]");
  CHECK(report.warnings.empty());

  TestGraph old_opset(7);
  Value* x7 = old_opset.Input("x", DataType::kFloat, "[1,3,4,4]");
  Value* up7 = old_opset.Apply("Upsample", {x7}, "up", {FloatsAttr("scales", {1, 1, 2, 2.5f})});
  old_opset.Infer();
  CHECK(TypeOf(up7) == "float[1,3,8,10]");

  TestGraph opset9(9);
  Value* x9 = opset9.Input("x", DataType::kFloat, "[1,3,4,4]");
  Value* up9 =
      opset9.Apply("Upsample", {x9, opset9.Initializer("s", FloatVector({1, 1, 2, 2.5f}))}, "up");
  Value* ignored_attribute =
      opset9.Apply("Upsample", {x9, opset9.Input("s_in", DataType::kFloat, "[4]")}, "ignored",
                   {FloatsAttr("scales", {1, 1, 2, 2})});
  opset9.Infer();
  CHECK(TypeOf(up9) == "float[1,3,8,10]");
  CHECK(TypeOf(ignored_attribute) == "float[?,?,?,?]");
}

TEST_CASE("If takes what both branches agree on", "[shape]") {
  TestGraph g;
  Value* cond = g.Input("cond", DataType::kBool, "[]");
  Value* x = g.Input("x", DataType::kFloat, "[batch,8]");
  Node* if_node = g.Op("If", {cond}, {"y", "z"});
  auto then_branch = std::make_unique<Graph>(&g.graph());
  Value* t_y = then_branch->CreateValue("t_y");
  Value* t_z = then_branch->CreateValue("t_z");
  then_branch->CreateNode("Relu", "", {x}, {t_y});
  then_branch->CreateNode("ReduceSum", "", {x}, {t_z});  // keepdims: [1,1]
  then_branch->AddOutput(t_y);
  then_branch->AddOutput(t_z);
  auto else_branch = std::make_unique<Graph>(&g.graph());
  Value* e_y = else_branch->CreateValue("e_y");
  Value* e_z = else_branch->CreateValue("e_z");
  else_branch->CreateNode("Neg", "", {x}, {e_y});
  else_branch->CreateNode("ReduceMax", "", {x}, {e_z})->SetAttribute(IntsAttr("axes", {1}).Make());
  else_branch->AddOutput(e_y);
  else_branch->AddOutput(e_z);
  SetGraphAttribute(if_node, "then_branch", std::move(then_branch));
  SetGraphAttribute(if_node, "else_branch", std::move(else_branch));
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(t_z) == "float[1,1]");
  CHECK(TypeOf(e_z) == "float[batch,1]");
  CHECK(TypeOf(if_node->output(0)) == "float[batch,8]");
  CHECK(TypeOf(if_node->output(1)) == "float[?,1]");
  CHECK(report.values_inferred == 6);
}

TEST_CASE("Loop types its body and stacks scan outputs", "[shape]") {
  TestGraph g;
  Value* trip = g.Input("trip", DataType::kInt64, "[]");
  Value* x = g.Input("x", DataType::kFloat, "[batch,8]");
  Node* loop = g.Op("Loop", {trip, nullptr, x}, {"final", "scans"});
  auto body = std::make_unique<Graph>(&g.graph());
  Value* iteration = body->CreateValue("iteration");
  Value* cond_in = body->CreateValue("cond_in");
  Value* carried = body->CreateValue("carried");
  for (Value* input : {iteration, cond_in, carried}) body->AddInput(input);
  Value* cond_out = body->CreateValue("cond_out");
  Value* next = body->CreateValue("next");
  Value* total = body->CreateValue("total");
  body->CreateNode("Identity", "", {cond_in}, {cond_out});
  body->CreateNode("Add", "", {carried, x}, {next});
  body->CreateNode("ReduceSum", "", {next}, {total})->SetAttribute(IntAttr("keepdims", 0).Make());
  for (Value* output : {cond_out, next, total}) body->AddOutput(output);
  SetGraphAttribute(loop, "body", std::move(body));
  g.Infer();
  CHECK(TypeOf(iteration) == "int64[]");
  CHECK(TypeOf(cond_in) == "bool[]");
  CHECK(TypeOf(carried) == "float[?,?]");  // carried values may change shape per iteration
  CHECK(TypeOf(next) == "float[?,8]");     // x's 8 pins the last dim; batch against ? is open
  CHECK(TypeOf(loop->output(0)) == "float[?,8]");
  CHECK(TypeOf(loop->output(1)) == "float[?]");  // one scalar per iteration
}

TEST_CASE("Scan slices its inputs for the body and stacks outputs on the scan axis", "[shape]") {
  TestGraph g;
  Value* init = g.Input("init", DataType::kFloat, "[3]");
  Value* x = g.Input("x", DataType::kFloat, "[3,7]");
  Node* scan = g.Op("Scan", {init, x}, {"final", "ys"},
                    {IntAttr("num_scan_inputs", 1), IntsAttr("scan_input_axes", {1}),
                     IntsAttr("scan_output_axes", {1})});
  auto body = std::make_unique<Graph>(&g.graph());
  Value* state_in = body->CreateValue("state_in");
  Value* slice = body->CreateValue("slice");
  body->AddInput(state_in);
  body->AddInput(slice);
  Value* state_out = body->CreateValue("state_out");
  Value* y = body->CreateValue("y");
  body->CreateNode("Add", "", {state_in, slice}, {state_out});
  body->CreateNode("Identity", "", {state_out}, {y});
  body->AddOutput(state_out);
  body->AddOutput(y);
  SetGraphAttribute(scan, "body", std::move(body));
  g.Infer();
  CHECK(TypeOf(slice) == "float[3]");
  CHECK(TypeOf(scan->output(0)) == "float[3]");
  CHECK(TypeOf(scan->output(1)) == "float[3,7]");
}

TEST_CASE("onnxruntime contrib ops in com.microsoft", "[shape]") {
  TestGraph g;
  g.ImportOpset("com.microsoft", 1);
  Value* x = g.Input("x", DataType::kFloat16, "[batch,seq,16]");
  Value* skip = g.Input("skip", DataType::kFloat16, "[batch,seq,16]");
  Value* gamma = g.Input("gamma", DataType::kFloat16, "[16]");
  Node* skip_ln = g.Op("SkipLayerNormalization", {x, skip, gamma}, {"y", "mean", "inv_std", "sum"},
                       {}, "com.microsoft");
  Node* gelu = g.Op("FastGelu", {skip_ln->output(0)}, {"gelu"}, {}, "com.microsoft");
  Node* rms = g.Op("SimplifiedLayerNormalization", {gelu->output(0), gamma}, {"rms", "rms_inv"});
  Node* fused = g.Op("FusedMatMul", {x, x}, {"fused"}, {}, "com.microsoft");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(skip_ln->output(0)) == "float16[batch,seq,16]");
  CHECK(TypeOf(skip_ln->output(1)) == "float[batch,seq,1]");
  CHECK(TypeOf(skip_ln->output(3)) == "float16[batch,seq,16]");
  CHECK(TypeOf(gelu->output(0)) == "float16[batch,seq,16]");
  CHECK(TypeOf(rms->output(1)) == "float[batch,seq,1]");
  CHECK(TypeOf(fused->output(0)) == "undefined[*]");
  CHECK(report.unsupported_ops == std::vector<std::string>{"com.microsoft::FusedMatMul@1"});
}
