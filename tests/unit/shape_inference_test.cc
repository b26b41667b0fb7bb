// Shape inference: broadcasting, the merge contract, the report, elementwise ops, opset
// differences and symbolic data propagation through PyTorch-style shape computations.
#include "shape_inference/shape_inference.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>

#include "text_format/text_format.h"
#include "shape_inference_test_helpers.h"

using namespace fusionopt;
using namespace fusionopt::testing;

namespace {

std::string Broadcast(std::string_view a, std::string_view b) {
  std::optional<Shape> result = BroadcastShapes(ParseShape(a), ParseShape(b));
  return result ? ShapeToString(*result) : "mismatch";
}

bool HasWarningContaining(const ShapeInferenceReport& report, const std::string& text) {
  for (const std::string& warning : report.warnings) {
    if (warning.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("BroadcastShapes follows numpy rules on known dims", "[shape]") {
  CHECK(Broadcast("[2,3,4]", "[4]") == "[2,3,4]");
  CHECK(Broadcast("[2,1,4]", "[3,1]") == "[2,3,4]");
  CHECK(Broadcast("[]", "[5,6]") == "[5,6]");
  CHECK(Broadcast("[1]", "[1]") == "[1]");
  CHECK(Broadcast("[3]", "[4]") == "mismatch");
  CHECK(Broadcast("[2,3]", "[3,3]") == "mismatch");
}

TEST_CASE("BroadcastShapes keeps symbols where they are determined", "[shape]") {
  CHECK(Broadcast("[batch,1]", "[1,seq]") == "[batch,seq]");
  CHECK(Broadcast("[batch,seq]", "[batch,seq]") == "[batch,seq]");
  // A known size other than 1 decides: the symbol must be that size or 1.
  CHECK(Broadcast("[batch,64]", "[8,64]") == "[8,64]");
  CHECK(Broadcast("[1,64]", "[batch,64]") == "[batch,64]");
  // Two different symbols, or a symbol against an unknown dim, cannot be named.
  CHECK(Broadcast("[a]", "[b]") == "[?]");
  CHECK(Broadcast("[a]", "[?]") == "[?]");
  CHECK(Broadcast("[?,3]", "[5,3]") == "[5,3]");
}

TEST_CASE("binary elementwise ops broadcast and keep or change the dtype", "[shape]") {
  TestGraph g;
  Value* x = g.Input("x", DataType::kFloat, "[batch,3,1]");
  Value* y = g.Input("y", DataType::kFloat, "[4]");
  Value* exponent = g.Input("e", DataType::kInt32, "[]");
  Value* sum = g.Apply("Add", {x, y}, "sum");
  Value* less = g.Apply("Less", {x, y}, "less");
  Value* power = g.Apply("Pow", {x, exponent}, "power");
  Value* where = g.Apply("Where", {less, sum, y}, "where");
  Value* largest = g.Apply("Max", {x, y, sum}, "largest");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(sum) == "float[batch,3,4]");
  CHECK(TypeOf(less) == "bool[batch,3,4]");
  CHECK(TypeOf(power) == "float[batch,3,1]");
  CHECK(TypeOf(where) == "float[batch,3,4]");
  CHECK(TypeOf(largest) == "float[batch,3,4]");
  CHECK(report.warnings.empty());
  CHECK(report.unsupported_ops.empty());
  CHECK(report.values_inferred == 5);
}

TEST_CASE("shapes that do not broadcast warn and leave the shape unknown", "[shape]") {
  TestGraph g;
  Value* a = g.Input("a", DataType::kFloat, "[3]");
  Value* b = g.Input("b", DataType::kFloat, "[4]");
  Node* add = g.Op("Add", {a, b}, {"c"});
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(add->output(0)) == "float[*]");
  REQUIRE(report.warnings.size() == 1);
  CHECK(report.warnings[0] ==
        "node '" + add->name() + "': input shapes [3] and [4] do not broadcast");
}

TEST_CASE("unary ops, casts and predicates", "[shape]") {
  TestGraph g;
  Value* x = g.Input("x", DataType::kFloat16, "[N,8]");
  Value* like = g.Input("like", DataType::kDouble, "[1]");
  g.Apply("Relu", {x}, "relu");
  g.Apply("Cast", {x}, "cast", {IntAttr("to", 7)});
  g.Apply("CastLike", {x, like}, "cast_like");
  g.Apply("IsNaN", {x}, "nan");
  g.Apply("Clip", {x}, "clip");
  g.Apply("Softmax", {x}, "softmax", {IntAttr("axis", 1)});
  Value* bad_cast = g.Apply("Cast", {x}, "bad_cast");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(g.graph().FindValue("relu")) == "float16[N,8]");
  CHECK(TypeOf(g.graph().FindValue("cast")) == "int64[N,8]");
  CHECK(TypeOf(g.graph().FindValue("cast_like")) == "double[N,8]");
  CHECK(TypeOf(g.graph().FindValue("nan")) == "bool[N,8]");
  CHECK(TypeOf(g.graph().FindValue("clip")) == "float16[N,8]");
  CHECK(TypeOf(g.graph().FindValue("softmax")) == "float16[N,8]");
  // Cast without 'to' keeps the shape but cannot know the type.
  CHECK(TypeOf(bad_cast) == "undefined[N,8]");
  CHECK(HasWarningContaining(report, "attribute 'to'"));
}

TEST_CASE("Dropout's mask is bool from opset 10 and the data type before", "[shape]") {
  for (auto [opset, mask_type] : {std::pair<int64_t, std::string>{7, "float[2,5]"},
                                  std::pair<int64_t, std::string>{13, "bool[2,5]"}}) {
    TestGraph g(opset);
    Value* x = g.Input("x", DataType::kFloat, "[2,5]");
    Node* dropout = g.Op("Dropout", {x}, {"y", "mask"});
    g.Infer();
    CHECK(TypeOf(dropout->output(0)) == "float[2,5]");
    CHECK(TypeOf(dropout->output(1)) == mask_type);
  }
}

TEST_CASE("declared sizes win over inferred ones, proven sizes refine declared symbols, conflicts are reported",
          "[shape]") {
  TestGraph g;
  Value* x = g.Input("x", DataType::kFloat, "[2,7]");
  Node* relu = g.Op("Relu", {x}, {"y"});
  Value* y = relu->output(0);
  y->type().shape = ParseShape("[2,5]");  // the model's value_info disagrees on dim 1
  Node* neg = g.Op("Neg", {y}, {"z"});
  Value* z = neg->output(0);
  z->type().shape = ParseShape("[batch,?]");  // a declared symbol and an unknown dim
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(y) == "float[2,5]");
  // A declared symbol names a size the exporter did not know: the proven 2 refines it (as ONNX
  // merges dims), and the unknown dim is filled.
  CHECK(TypeOf(z) == "float[2,5]");
  REQUIRE(report.warnings.size() == 1);
  CHECK(report.warnings[0] == "node '" + relu->name() +
                                  "': value 'y' declares dim 1 as 5 but inference gives 7; "
                                  "keeping 5");
  CHECK(report.values_inferred == 2);  // y got its dtype, z its dtype and a dim
}

TEST_CASE("ONNX's generated unk__ placeholders give way to the model's symbols; named symbols stay",
          "[shape]") {
  TestGraph g;
  Value* x = g.Input("x", DataType::kFloat, "[batch,seq]");
  Value* placeholder = g.Apply("Relu", {x}, "placeholder");
  placeholder->type().shape = ParseShape("[unk__27,unk__28]");  // what onnx.shape_inference writes
  Value* named = g.Apply("Neg", {x}, "named");
  named->type().shape = ParseShape("[rows,unk__3]");
  Value* unrelated = g.Apply("Neg", {g.Input("u", DataType::kFloat, "[unk__1]")}, "unrelated");
  unrelated->type().shape = ParseShape("[unk__9]");
  g.Infer();
  CHECK(TypeOf(placeholder) == "float[batch,seq]");
  // A symbol the model chose names a size it means; only the placeholder is refined.
  CHECK(TypeOf(named) == "float[rows,seq]");
  // A placeholder never replaces another placeholder.
  CHECK(TypeOf(unrelated) == "float[unk__9]");
}

TEST_CASE("declared dtype and rank conflicts keep the declaration", "[shape]") {
  TestGraph g;
  Value* x = g.Input("x", DataType::kFloat, "[2,3]");
  Value* y = g.Apply("Relu", {x}, "y");
  y->type().dtype = DataType::kInt32;
  y->type().shape = ParseShape("[6]");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(y) == "int32[6]");
  CHECK(report.warnings.size() == 2);
  CHECK(HasWarningContaining(report, "declared int32 but inferred float"));
  CHECK(HasWarningContaining(report, "declared with rank 1 but inferred [2,3]"));
  CHECK(report.values_inferred == 0);
}

TEST_CASE("an op without a rule keeps its declared output and is reported", "[shape]") {
  TestGraph g;
  g.ImportOpset("com.example", 3);
  Value* x = g.Input("x", DataType::kFloat, "[4]");
  Value* custom = g.Op("Frobnicate", {x}, {"custom"}, {}, "com.example")->output(0);
  custom->type().dtype = DataType::kFloat;
  custom->type().shape = ParseShape("[n]");
  Value* unknown = g.Op("Mystery", {custom}, {"unknown"})->output(0);
  Value* untyped = g.Op("Secret", {x}, {"untyped"}, {}, "org.undeclared")->output(0);
  Value* after = g.Apply("Relu", {custom}, "after");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(custom) == "float[n]");
  CHECK(TypeOf(unknown) == "undefined[*]");
  CHECK(TypeOf(untyped) == "undefined[*]");
  CHECK(TypeOf(after) == "float[n]");  // inference continues from the declared type
  CHECK(report.unsupported_ops == std::vector<std::string>{"ai.onnx::Mystery@17",
                                                           "com.example::Frobnicate@3",
                                                           "org.undeclared::Secret@?"});
  CHECK(report.warnings.empty());
}

TEST_CASE("initializers are typed from their tensors", "[shape]") {
  TestGraph g;
  Value* weights = g.Initializer("w", FloatVector({1, 2, 3}));
  Value* x = g.Input("x", DataType::kFloat, "[2,3]");
  Value* y = g.Apply("Mul", {x, weights}, "y");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(weights) == "float[3]");
  CHECK(TypeOf(y) == "float[2,3]");
  CHECK(report.values_inferred == 2);
}

TEST_CASE("Squeeze reads axes from the attribute before opset 13, the input after", "[shape]") {
  {
    TestGraph g(11);
    Value* x = g.Input("x", DataType::kFloat, "[1,3,1]");
    Value* y = g.Apply("Squeeze", {x}, "y", {IntsAttr("axes", {0})});
    g.Infer();
    CHECK(TypeOf(y) == "float[3,1]");
  }
  {
    TestGraph g(13);
    Value* x = g.Input("x", DataType::kFloat, "[1,3,1]");
    Value* y = g.Apply("Squeeze", {x, g.Ints("axes", {-1})}, "y");
    // An axes attribute is not part of opset 13: without the input every 1 goes.
    Value* z = g.Apply("Squeeze", {x}, "z", {IntsAttr("axes", {0})});
    g.Infer();
    CHECK(TypeOf(y) == "float[1,3]");
    CHECK(TypeOf(z) == "float[3]");
  }
}

TEST_CASE("Squeeze of a dim that is not 1 warns; unknown dims block axis-less squeeze", "[shape]") {
  TestGraph g(13);
  Value* x = g.Input("x", DataType::kFloat, "[1,3,1]");
  Value* bad = g.Apply("Squeeze", {x, g.Ints("axes", {1})}, "bad");
  Value* s = g.Input("s", DataType::kFloat, "[1,n]");
  Value* unclear = g.Apply("Squeeze", {s}, "unclear");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(bad) == "float[*]");
  CHECK(HasWarningContaining(report, "cannot squeeze axis 1 of size 3"));
  CHECK(TypeOf(unclear) == "float[*]");  // n might be 1
}

TEST_CASE("Unsqueeze at opset 11 and 13", "[shape]") {
  TestGraph old_opset(11);
  Value* a = old_opset.Input("a", DataType::kInt64, "[3,4]");
  Value* a_out = old_opset.Apply("Unsqueeze", {a}, "out", {IntsAttr("axes", {0, -1})});
  old_opset.Infer();
  CHECK(TypeOf(a_out) == "int64[1,3,4,1]");

  TestGraph new_opset(13);
  Value* b = new_opset.Input("b", DataType::kInt64, "[3,4]");
  Value* b_out = new_opset.Apply("Unsqueeze", {b, new_opset.Ints("axes", {1})}, "out");
  Value* axes = new_opset.Input("computed_axes", DataType::kInt64, "[2]");
  Value* computed = new_opset.Apply("Unsqueeze", {b, axes}, "computed");
  new_opset.Infer();
  CHECK(TypeOf(b_out) == "int64[3,1,4]");
  CHECK(TypeOf(computed) == "int64[?,?,?,?]");  // rank from the axes' length only
}

TEST_CASE("ReduceMean takes axes as an attribute before opset 18, as an input from 18", "[shape]") {
  {
    TestGraph g(17);
    Value* x = g.Input("x", DataType::kFloat, "[B,S,64]");
    Value* kept = g.Apply("ReduceMean", {x}, "kept", {IntsAttr("axes", {-1})});
    Value* dropped =
        g.Apply("ReduceMean", {x}, "dropped", {IntsAttr("axes", {1}), IntAttr("keepdims", 0)});
    Value* all = g.Apply("ReduceMean", {x}, "all");
    g.Infer();
    CHECK(TypeOf(kept) == "float[B,S,1]");
    CHECK(TypeOf(dropped) == "float[B,64]");
    CHECK(TypeOf(all) == "float[1,1,1]");
  }
  {
    TestGraph g(18);
    Value* x = g.Input("x", DataType::kFloat, "[B,S,64]");
    Value* kept = g.Apply("ReduceMean", {x, g.Ints("axes", {-1})}, "kept");
    Value* noop = g.Apply("ReduceMean", {x}, "noop", {IntAttr("noop_with_empty_axes", 1)});
    Value* axes = g.Input("computed_axes", DataType::kInt64, "[2]");
    Value* computed = g.Apply("ReduceMean", {x, axes}, "computed", {IntAttr("keepdims", 0)});
    g.Infer();
    CHECK(TypeOf(kept) == "float[B,S,1]");
    CHECK(TypeOf(noop) == "float[B,S,64]");
    CHECK(TypeOf(computed) == "float[?]");
  }
}

TEST_CASE("ReduceSum moved its axes to an input at opset 13", "[shape]") {
  TestGraph g(13);
  Value* x = g.Input("x", DataType::kFloat, "[2,3,4]");
  Value* summed =
      g.Apply("ReduceSum", {x, g.Ints("axes", {0, 2})}, "summed", {IntAttr("keepdims", 0)});
  Value* out_of_range = g.Apply("ReduceSum", {x, g.Ints("bad_axes", {3})}, "bad");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(summed) == "float[3]");
  CHECK(TypeOf(out_of_range) == "float[*]");
  CHECK(HasWarningContaining(report, "axis 3 is out of range for rank 3"));
}

TEST_CASE("ArgMax produces int64 with or without the reduced axis", "[shape]") {
  TestGraph g;
  Value* x = g.Input("x", DataType::kFloat, "[N,10]");
  Value* kept = g.Apply("ArgMax", {x}, "kept", {IntAttr("axis", 1)});
  Value* dropped = g.Apply("ArgMin", {x}, "dropped", {IntAttr("axis", -1), IntAttr("keepdims", 0)});
  g.Infer();
  CHECK(TypeOf(kept) == "int64[N,1]");
  CHECK(TypeOf(dropped) == "int64[N]");
}

TEST_CASE("Split by sizes (input at 13), equal parts, and num_outputs at 18", "[shape]") {
  {
    TestGraph g(13);
    Value* x = g.Input("x", DataType::kFloat, "[B,10]");
    Node* by_sizes = g.Op("Split", {x, g.Ints("sizes", {3, 7})}, {"a", "b"}, {IntAttr("axis", 1)});
    Node* uneven = g.Op("Split", {x}, {"c", "d", "e"}, {IntAttr("axis", 1)});
    ShapeInferenceReport report = g.Infer();
    CHECK(TypeOf(by_sizes->output(0)) == "float[B,3]");
    CHECK(TypeOf(by_sizes->output(1)) == "float[B,7]");
    // Before opset 18 the parts must be equal.
    CHECK(TypeOf(uneven->output(0)) == "float[B,?]");
    CHECK(HasWarningContaining(report, "size 10 does not split into 3 parts"));
  }
  {
    TestGraph g(18);
    Value* x = g.Input("x", DataType::kFloat, "[B,10]");
    Node* split =
        g.Op("Split", {x}, {"a", "b", "c"}, {IntAttr("axis", 1), IntAttr("num_outputs", 3)});
    ShapeInferenceReport report = g.Infer();
    CHECK(TypeOf(split->output(0)) == "float[B,4]");
    CHECK(TypeOf(split->output(1)) == "float[B,4]");
    CHECK(TypeOf(split->output(2)) == "float[B,2]");
    CHECK(report.warnings.empty());
  }
  {
    TestGraph g(11);
    Value* x = g.Input("x", DataType::kFloat, "[6,B]");
    Node* split = g.Op("Split", {x}, {"a", "b"}, {IntsAttr("split", {2, 4})});
    g.Infer();
    CHECK(TypeOf(split->output(0)) == "float[2,B]");
    CHECK(TypeOf(split->output(1)) == "float[4,B]");
  }
}

// The pipeline fuzzer's finding: the sizes' sum overflowed int64 (undefined) before it was
// compared with the dim.
TEST_CASE("Split sizes that are negative or overflow their sum are a mismatch, not a shape", "[shape]") {
  const int64_t huge = int64_t{1} << 62;
  for (const std::vector<int64_t>& sizes :
       {std::vector<int64_t>{huge, huge, huge}, std::vector<int64_t>{std::numeric_limits<int64_t>::max(), 1}, std::vector<int64_t>{-2, 8}}) {
    for (const char* dims : {"[B,6]", "[B,N]"}) {
      TestGraph g(13);
      Value* x = g.Input("x", DataType::kFloat, dims);
      std::vector<std::string> outputs;
      for (size_t i = 0; i < sizes.size(); ++i) outputs.push_back("part" + std::to_string(i));
      Node* split = g.Op("Split", {x, g.Ints("sizes", sizes)}, outputs, {IntAttr("axis", 1)});
      ShapeInferenceReport report = g.Infer();
      CHECK(TypeOf(split->output(0)) == "float[B,?]");
      CHECK(HasWarningContaining(report, "split sizes do not match"));
    }
  }
  TestGraph g(13);  // the same check passes sizes that fit
  Value* x = g.Input("x", DataType::kFloat, "[B,N]");
  Node* split = g.Op("Split", {x, g.Ints("sizes", {0, 5})}, {"a", "b"}, {IntAttr("axis", 1)});
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(split->output(0)) == "float[B,0]");
  CHECK(TypeOf(split->output(1)) == "float[B,5]");
  CHECK(report.warnings.empty());
}

// x: [batch, sequence, 64] -> [batch, sequence, 4, 16] through the shape arithmetic that
// torch.onnx emits for view(x.size(0), x.size(1), 4, 16).
TEST_CASE("Shape -> Gather -> Unsqueeze -> Concat -> Reshape keeps symbolic dims", "[shape]") {
  TestGraph g(13);
  Value* x = g.Input("x", DataType::kFloat, "[batch,sequence,64]");
  Value* shape = g.Apply("Shape", {x}, "shape");
  Value* zero = g.Initializer("zero", Int64Tensor({0}, {}));
  Value* one = g.Initializer("one", Int64Tensor({1}, {}));
  Value* batch = g.Apply("Gather", {shape, zero}, "batch", {IntAttr("axis", 0)});
  Value* sequence = g.Apply("Gather", {shape, one}, "sequence", {IntAttr("axis", 0)});
  Value* axes = g.Ints("axes", {0});
  Value* batch_1d = g.Apply("Unsqueeze", {batch, axes}, "batch_1d");
  Value* sequence_1d = g.Apply("Unsqueeze", {sequence, axes}, "sequence_1d");
  Node* heads = g.Op("Constant", {}, {"heads"}, {TensorAttr("value", Int64Vector({4}))});
  Value* target = g.Apply("Concat", {batch_1d, sequence_1d, heads->output(0), g.Ints("size", {16})},
                          "target", {IntAttr("axis", 0)});
  Value* split_heads = g.Apply("Reshape", {x, target}, "split_heads");
  Value* transposed =
      g.Apply("Transpose", {split_heads}, "transposed", {IntsAttr("perm", {0, 2, 1, 3})});
  // Back again with -1: batch * sequence * 64 / (batch * 64) leaves sequence.
  Value* merge_target =
      g.Apply("Concat", {batch_1d, g.Ints("minus_one", {-1}), g.Ints("hidden", {64})},
              "merge_target", {IntAttr("axis", 0)});
  Value* merged = g.Apply("Reshape", {split_heads, merge_target}, "merged");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(shape) == "int64[3]");
  CHECK(TypeOf(batch) == "int64[]");
  CHECK(TypeOf(batch_1d) == "int64[1]");
  CHECK(TypeOf(target) == "int64[4]");
  CHECK(TypeOf(split_heads) == "float[batch,sequence,4,16]");
  CHECK(TypeOf(transposed) == "float[batch,4,sequence,16]");
  CHECK(TypeOf(merged) == "float[batch,sequence,64]");
  CHECK(report.warnings.empty());
  CHECK(report.values_inferred == 17);  // 11 node outputs and 6 initializers

  // A second run finds everything known and changes nothing.
  ShapeInferenceReport again = g.Infer();
  CHECK(again.values_inferred == 0);
  CHECK(again.warnings.empty());
  CHECK(TypeOf(merged) == "float[batch,sequence,64]");
}

TEST_CASE("tracked shape data follows Slice, Cast, arithmetic and Shape's start/end", "[shape]") {
  TestGraph g(15);
  Value* x = g.Input("x", DataType::kFloat, "[batch,sequence,12,64]");
  Value* leading = g.Apply("Shape", {x}, "leading", {IntAttr("end", 2)});
  Value* trailing = g.Apply("Shape", {x}, "trailing", {IntAttr("start", -2)});
  Value* as_int32 = g.Apply("Cast", {trailing}, "as_int32", {IntAttr("to", 6)});
  Value* back = g.Apply("Cast", {as_int32}, "back", {IntAttr("to", 7)});
  // heads * head_size = 768, computed the way exports do it.
  Value* heads = g.Apply("Slice", {back, g.Ints("s0", {0}), g.Ints("e0", {1})}, "heads");
  Value* head_size = g.Apply(
      "Slice", {back, g.Ints("s1", {-1}), g.Ints("e1", {9223372036854775807})}, "head_size");
  Value* hidden = g.Apply("Mul", {heads, head_size}, "hidden");
  Value* target = g.Apply("Concat", {leading, hidden}, "target", {IntAttr("axis", 0)});
  Value* merged = g.Apply("Reshape", {x, target}, "merged");
  // Casting to float leaves shape arithmetic: the target is no longer tracked.
  Value* as_float = g.Apply("Cast", {target}, "as_float", {IntAttr("to", 1)});
  Value* round_trip = g.Apply("Cast", {as_float}, "round_trip", {IntAttr("to", 7)});
  Value* opaque = g.Apply("Reshape", {x, round_trip}, "opaque");
  g.Infer();
  CHECK(TypeOf(leading) == "int64[2]");
  CHECK(TypeOf(trailing) == "int64[2]");
  CHECK(TypeOf(merged) == "float[batch,sequence,768]");
  CHECK(TypeOf(opaque) == "float[?,?,?]");
}

// x.expand(batch, -1) as TorchScript exports it: the target's -1 entries are found with
// Equal(target, ConstantOfShape(Shape(target)) * -1) and replaced by Where with the input's dims.
TEST_CASE("TorchScript's expand target folds through ConstantOfShape, Equal and Where", "[shape]") {
  TestGraph g(17);
  Value* ids = g.Input("ids", DataType::kInt64, "[batch,sequence]");
  Value* shape = g.Apply("Shape", {ids}, "shape");
  Value* batch = g.Apply("Gather", {shape, g.Initializer("zero", Int64Tensor({0}, {}))}, "batch",
                         {IntAttr("axis", 0)});
  Value* batch_1d = g.Apply("Unsqueeze", {batch, g.Ints("axes", {0})}, "batch_1d");
  Value* concat = g.Apply("Concat", {batch_1d, g.Ints("keep", {-1})}, "concat", {IntAttr("axis", 0)});
  Value* target = g.Apply("Reshape", {concat, g.Ints("flat", {-1})}, "target");
  Value* target_shape = g.Apply("Shape", {target}, "target_shape");
  Value* ones = g.Apply("ConstantOfShape", {target_shape}, "ones",
                        {TensorAttr("value", Int64Tensor({1}, {1}))});
  Value* minus_ones = g.Apply("Mul", {ones, g.Initializer("minus", Int64Tensor({-1}, {}))}, "minus_ones");
  Value* keep = g.Apply("Equal", {target, minus_ones}, "is_minus_one");
  Value* resolved = g.Apply("Where", {keep, ones, target}, "resolved");
  Value* row = g.Input("row", DataType::kFloat, "[1,sequence]");
  Value* expanded = g.Apply("Expand", {row, resolved}, "expanded");
  // A computed condition that is not shape data leaves the target unknown.
  Value* flags = g.Input("flags", DataType::kBool, "[2]");
  Value* opaque_target = g.Apply("Where", {flags, ones, target}, "opaque_target");
  Value* opaque = g.Apply("Expand", {row, opaque_target}, "opaque");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(expanded) == "float[batch,sequence]");
  CHECK(TypeOf(opaque) == "float[?,?]");
  CHECK(report.warnings.empty());
}

TEST_CASE("Reshape: 0 copies, -1 infers, allowzero keeps zeros, computed shapes give rank",
          "[shape]") {
  TestGraph g(14);
  Value* x = g.Input("x", DataType::kFloat, "[2,3,4]");
  Value* copy_and_infer = g.Apply("Reshape", {x, g.Ints("t1", {0, -1})}, "copy_and_infer");
  Value* allow_zero = g.Input("empty", DataType::kFloat, "[0,5]");
  Value* zero_kept = g.Apply("Reshape", {allow_zero, g.Ints("t2", {0, 5})}, "zero_kept",
                             {IntAttr("allowzero", 1)});
  Value* computed = g.Input("computed_shape", DataType::kInt64, "[4]");
  Value* rank_only = g.Apply("Reshape", {x, computed}, "rank_only");
  Value* mismatch = g.Apply("Reshape", {x, g.Ints("t3", {5, 5})}, "mismatch");
  Value* two_minus = g.Apply("Reshape", {x, g.Ints("t4", {-1, -1})}, "two_minus");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(copy_and_infer) == "float[2,12]");
  CHECK(TypeOf(zero_kept) == "float[0,5]");
  CHECK(TypeOf(rank_only) == "float[?,?,?,?]");
  CHECK(TypeOf(mismatch) == "float[*]");
  CHECK(HasWarningContaining(report, "cannot reshape [2,3,4] to [5,5]"));
  CHECK(TypeOf(two_minus) == "float[*]");
  CHECK(HasWarningContaining(report, "more than one -1"));
}

TEST_CASE("Reshape -1 over symbols names their product; one that does not divide stays unknown", "[shape]") {
  TestGraph g;
  Value* x = g.Input("x", DataType::kFloat, "[batch,sequence,64]");
  Value* flat = g.Apply("Reshape", {x, g.Ints("t", {-1, 64})}, "flat");
  Value* halves = g.Apply("Reshape", {x, g.Ints("t2", {0, 0, 2, -1})}, "halves");
  Value* thirds = g.Apply("Reshape", {x, g.Ints("t3", {3, -1})}, "thirds");
  // A product symbol divides again: [4*batch*sequence,8] back to rows of 32 is batch·sequence.
  Value* heads = g.Input("heads", DataType::kFloat, "[batch,4,sequence,8]");
  Value* rows = g.Apply("Reshape", {heads, g.Ints("t4", {-1, 8})}, "rows");
  Value* wide = g.Apply("Reshape", {rows, g.Ints("t5", {-1, 32})}, "wide");
  g.Infer();
  CHECK(TypeOf(flat) == "float[batch*sequence,64]");
  CHECK(TypeOf(halves) == "float[batch,sequence,2,32]");
  CHECK(TypeOf(thirds) == "float[3,?]");  // 64·batch·sequence / 3 has no exact name
  CHECK(TypeOf(rows) == "float[4*batch*sequence,8]");
  CHECK(TypeOf(wide) == "float[batch*sequence,32]");
}

TEST_CASE("shape arithmetic multiplies and divides dims symbolically (TorchScript's [B*H,-1,D] targets)", "[shape]") {
  TestGraph g;
  Value* x = g.Input("x", DataType::kFloat, "[batch,4,sequence,8]");
  Value* batch = g.Apply("Gather", {g.Apply("Shape", {x}, "dims"), g.Ints("first", {0})}, "batch");
  Value* flat_heads = g.Apply("Mul", {batch, g.Ints("four", {4})}, "flat_heads");
  Value* target = g.Apply("Concat", {flat_heads, g.Ints("rest", {-1, 8})}, "target", {IntAttr("axis", 0)});
  Value* flattened = g.Apply("Reshape", {x, target}, "flattened");
  Value* back = g.Apply("Div", {flat_heads, g.Ints("four_again", {4})}, "back");
  Value* unflat_target = g.Apply("Concat", {back, g.Ints("heads", {4, -1, 8})}, "unflat_target", {IntAttr("axis", 0)});
  Value* unflattened = g.Apply("Reshape", {flattened, unflat_target}, "unflattened");
  Value* odd = g.Apply("Div", {flat_heads, g.Ints("three", {3})}, "odd");
  Value* odd_target = g.Apply("Concat", {odd, g.Ints("odd_rest", {-1})}, "odd_target", {IntAttr("axis", 0)});
  Value* odd_view = g.Apply("Reshape", {x, odd_target}, "odd_view");
  g.Infer();
  CHECK(TypeOf(flattened) == "float[4*batch,sequence,8]");
  CHECK(TypeOf(unflattened) == "float[batch,4,sequence,8]");
  CHECK(TypeOf(odd_view) == "float[?,?]");  // 4·batch / 3 is no exact quotient
}

TEST_CASE("malformed arguments warn and leave outputs unknown instead of failing", "[shape]") {
  TestGraph g(13);
  Value* x = g.Input("x", DataType::kFloat, "[2,3]");
  // Three computed axes cannot be squeezed from a rank-2 tensor.
  Value* squeezed = g.Apply("Squeeze", {x, g.Input("axes", DataType::kInt64, "[3]")}, "squeezed");
  // A computed target of a million elements is not a plausible rank.
  Value* reshaped =
      g.Apply("Reshape", {x, g.Input("huge", DataType::kInt64, "[1000000]")}, "reshaped");
  Value* nan_depth = g.Apply("OneHot",
                             {g.Input("indices", DataType::kInt64, "[4]"),
                              g.Initializer("depth", FloatVector({std::nanf("")})),
                              g.Initializer("values", FloatVector({0, 1}))},
                             "nan_depth");
  auto scalar = [](int64_t value) { return Int64Tensor({value}, {}); };
  Value* no_step = g.Apply("Range",
                           {g.Initializer("start", scalar(0)), g.Initializer("limit", scalar(5)),
                            g.Initializer("delta", scalar(0))},
                           "no_step");
  Value* overflow =
      g.Apply("Mul", {g.Apply("Shape", {x}, "shape"), g.Ints("big", {INT64_MAX})}, "overflow");
  Value* filled = g.Apply("ConstantOfShape", {overflow}, "filled");
  ShapeInferenceReport report = g.Infer();
  CHECK(TypeOf(squeezed) == "float[*]");
  CHECK(HasWarningContaining(report, "implausible output rank -1"));
  CHECK(TypeOf(reshaped) == "float[*]");
  CHECK(HasWarningContaining(report, "implausible output rank 1000000"));
  CHECK(TypeOf(nan_depth) == "float[4,?]");
  CHECK(TypeOf(no_step) == "int64[?]");
  CHECK(HasWarningContaining(report, "delta is 0"));
  CHECK(TypeOf(filled) == "float[?,?]");  // 2 * INT64_MAX overflows: unknown, not wrapped
}

// ---------------------------------------------------------------- model-local functions

namespace {

std::unique_ptr<Model> ParseOrFail(std::string_view text) {
  auto parsed = ParseModel(text);
  INFO(parsed.status().message());
  REQUIRE(parsed.ok());
  return std::move(parsed).value();
}

std::string TypeOfValue(const Model& model, std::string_view name) {
  return TypeOf(model.graph->FindValue(name));
}

}  // namespace

TEST_CASE("a function call is typed by inferring the body with the call's types", "[shape][function]") {
  auto model = ParseOrFail(R"(ir_version 8
opset "" 17
opset "ai.fusionopt" 1
graph main (float[N,4] %x, float[4] %b, double[2,3] %d, float[3] %three, float[1,1,4] %o) -> (%y) {
  %y = ai.fusionopt::AddRelu(%x, %b)
  %z = ai.fusionopt::AddRelu(%d, %d)
  %bad = ai.fusionopt::AddRelu(%x, %three)
  %wide = ai.fusionopt::CastTo(%x) {to: 7}
  %half = ai.fusionopt::CastTo(%x) {to: 10}
  %nested = ai.fusionopt::Outer(%x, %b)
  %squeezed = ai.fusionopt::SqueezeOne(%o)
}

function ai.fusionopt::AddRelu (%a, %c) -> (%r) opset "" 17 {
  %t = Add(%a, %c)
  %r = Relu(%t)
}

function ai.fusionopt::CastTo (%a) -> (%r) attributes [to] opset "" 17 {
  %r = Cast(%a) {to: ref int to}
}

function ai.fusionopt::Outer (%p, %q) -> (%r) opset "ai.fusionopt" 1 {
  %r = ai.fusionopt::AddRelu(%p, %q)
}

function ai.fusionopt::SqueezeOne (%a) -> (%r) opset "" 11 {
  %r = Squeeze(%a) {axes: [1]}
}
)");
  ShapeInferenceReport report = InferShapes(*model);

  CHECK(report.error.ok());
  CHECK(TypeOfValue(*model, "y") == "float[N,4]");
  CHECK(TypeOfValue(*model, "z") == "double[2,3]");  // same function, other argument types
  CHECK(TypeOfValue(*model, "wide") == "int64[N,4]");  // the caller's attribute reaches the body
  CHECK(TypeOfValue(*model, "half") == "float16[N,4]");
  CHECK(TypeOfValue(*model, "nested") == "float[N,4]");  // through a function calling a function
  // The body runs at the function's opset 11, where Squeeze reads its axes attribute; at
  // the model's 17 it would squeeze every size-1 dim and give [4].
  CHECK(TypeOfValue(*model, "squeezed") == "float[1,4]");
  CHECK(HasWarningContaining(report, "function 'ai.fusionopt::AddRelu': "));
  CHECK(TypeOfValue(*model, "bad") == "float[*]");
  CHECK(report.unsupported_ops.empty());

  // The function itself stays untyped: every call may bring other types.
  const Graph& body = *model->FindFunction("ai.fusionopt", "AddRelu")->body;
  CHECK(body.FindValue("t")->dtype() == DataType::kUndefined);
  CHECK(body.inputs()[0]->dtype() == DataType::kUndefined);
}

TEST_CASE("a constant argument's content reaches the called body", "[shape][function]") {
  // What the CUDA backend's planning sees once shape arithmetic is folded: the attention body's
  // Reshape targets are initializers [1,8,-1,8] and [1,8,-1], whose -1 the body resolves only
  // when it reads their values. Two calls with other targets are inferred apart.
  auto model = ParseOrFail(R"(ir_version 8
opset "" 17
opset "ai.fusionopt" 1
graph main (float[1,8,32] %x) -> (%y, %z)
  init int64[4] %split_heads = [1, 8, -1, 8]
  init int64[3] %merge = [1, 8, -1]
  init int64[3] %flat = [1, -1, 1]
{
  %y = ai.fusionopt::Heads(%x, %split_heads, %merge)
  %z = ai.fusionopt::Heads(%x, %split_heads, %flat)
}

function ai.fusionopt::Heads (%a, %s, %m) -> (%r) opset "" 17 {
  %h = Reshape(%a, %s) {allowzero: 1}
  %t = Transpose(%h) {perm: [0, 2, 1, 3]}
  %u = Transpose(%t) {perm: [0, 2, 1, 3]}
  %r = Reshape(%u, %m) {allowzero: 1}
}
)");
  ShapeInferenceReport report = InferShapes(*model);
  CHECK(report.error.ok());
  CHECK(TypeOfValue(*model, "y") == "float[1,8,32]");
  CHECK(TypeOfValue(*model, "z") == "float[1,256,1]");
}

TEST_CASE("a function calling itself is an InvalidModel error naming the chain", "[shape][function]") {
  auto model = ParseOrFail(R"(ir_version 8
opset "" 17
opset "ai.fusionopt" 1
graph main (float[4] %x) -> (%y) {
  %y = ai.fusionopt::F(%x)
  %fine = Relu(%x)
}

function ai.fusionopt::F (%a) -> (%r) opset "ai.fusionopt" 1 {
  %r = ai.fusionopt::G(%a)
}

function ai.fusionopt::G (%a) -> (%r) opset "" 17 opset "ai.fusionopt" 1 {
  %n = Neg(%a)
  %r = ai.fusionopt::F(%n)
}
)");
  ShapeInferenceReport report = InferShapes(*model);

  CHECK(report.error.code() == ErrorCode::kInvalidModel);
  CHECK(report.error.message() ==
        "function 'ai.fusionopt::F' calls itself: ai.fusionopt::F -> ai.fusionopt::G -> ai.fusionopt::F");
  CHECK(TypeOfValue(*model, "y") == "undefined[*]");
  CHECK(TypeOfValue(*model, "fine") == "float[4]");  // the rest of the graph is still typed
}
