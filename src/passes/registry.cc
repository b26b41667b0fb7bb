// Every pass and every level's pipeline, in one place.
//
// Order and why:
//   O1 (cleanup, standard ops only — the result runs anywhere):
//     eliminate-dead-code first, so later passes do not spend time on what will go.
//   O2 (vertical fusion) runs O1 first, so patterns meet a clean graph.
//   O3 runs O1, then its own passes (LevelThreeBeforeVertical), then O2's, then the
//   horizontal merge of the elementwise kernels O2 formed (LevelThreeAfterVertical).
//   Each level ends with eliminate-dead-code: rewrites leave orphans behind.
#include "passes/registry.h"

#include <algorithm>

#include "passes/layout/commute_transposes.h"
#include "passes/cleanup/eliminate_common_subexpressions.h"
#include "passes/cleanup/eliminate_dead_code.h"
#include "passes/cleanup/drop_qdq_around_data_movement.h"
#include "passes/cleanup/quantize_concat_inputs.h"
#include "passes/cleanup/eliminate_no_ops.h"
#include "passes/fold/fold_batchnorm.h"
#include "passes/fold/fold_constants.h"
#include "passes/fold/fold_scale_into_conv.h"
#include "passes/fold/fold_scale_into_matmul.h"
#include "passes/fusion/attention/fuse_attention.h"
#include "passes/layout/gathers_to_slices.h"
#include "passes/fusion/vertical/fuse_composites.h"
#include "passes/fusion/vertical/fuse_contraction_epilogues.h"
#include "passes/fusion/vertical/fuse_elementwise.h"
#include "passes/fusion/vertical/fuse_quantized_contractions.h"
#include "passes/fusion/horizontal/fuse_horizontal_contractions.h"
#include "passes/fusion/horizontal/fuse_horizontal_elementwise.h"
#include "passes/fusion/vertical/lower_batchnorm.h"
#include "passes/conversion/ort/lower_for_ort.h"
#include "passes/conversion/qoperator_to_qdq.h"
#include "passes/fold/matmul_add_to_gemm.h"
#include "passes/layout/merge_reshapes.h"
#include "passes/fold/merge_summed_contractions.h"
#include "passes/cleanup/share_duplicate_initializers.h"
#include "passes/layout/sink_views.h"
#include "passes/layout/slices_to_split.h"
#include "passes/layout/unflatten_batch_matmuls.h"

namespace fusionopt::passes {
namespace {

template <typename P>
PassInfo Describe(int level) {
  P pass;
  return PassInfo{std::string(pass.name()), level, "", std::string(pass.summary()), std::string(pass.rewrite()),
                  pass.options(), [] { return std::unique_ptr<Pass>(new P()); }};
}

template <typename P>
PassInfo DescribeConversion(std::string runtime) {
  PassInfo info = Describe<P>(0);
  info.runtime = std::move(runtime);
  return info;
}

const std::vector<std::string>& LevelOne() {
  static const std::vector<std::string> passes = {
      "eliminate-dead-code",
      // Constants first: the light models' ConstantOfShape weights and static shape chains
      // become initializers the weight folds below can read.
      "fold-constants",
      // After folding (shape operands are constants by now, so more ops are provably no-ops)
      // and before the weight folds, whose Conv → BN patterns an Identity or Dropout between
      // them would hide. merge-reshapes next: a removed no-op can join two layout ops.
      "eliminate-no-ops",
      // A quantized model's data movement (MaxPool, Reshape, Concat, Resize) runs on its
      // quantized values, before the layout passes below meet it between a DQ and a Q.
      "drop-qdq-around-data-movement",
      // Then a Concat of differently quantized inputs joins them requantized (YOLOv8's C2f).
      "quantize-concat-inputs",
      // Indexing by a constant list of consecutive indices (Falcon's fused_qkv[..., [-2], :]) is a
      // Slice, and Slices of a Transpose slice its input, so that the pieces meet below.
      "gathers-to-slices",
      // Slices that cut a value into consecutive pieces (TorchScript's chunk) become the one
      // Split the dynamo exporter writes, so that every pass after meets one form; their
      // bounds are constants once folded.
      "slices-to-split",
      // A Reshape between a contraction and its elementwise epilogue (GPT-2's Conv1D: Gemm,
      // Reshape to 3-D, GELU, Reshape back) moves below the epilogue, next to the view after it.
      "sink-views",
      // A Transpose between a layout chain and the MatMul/Gemm by constant weights next to it
      // (torchvision's nn.MultiheadAttention) crosses the contraction to join the chain.
      "commute-transposes",
      // Batched MatMuls over a flattened batch axis (BLOOM's baddbmm, nn.MultiheadAttention's
      // bmm) run on the unflattened tensors, after the Transposes above settled next to the
      // Reshapes, and before merge-reshapes drops the Reshapes back that are no-ops now.
      "unflatten-batch-matmuls",
      "merge-reshapes",
      // BatchNormalization before Mul/Add folding: a Conv → BN → Mul → Add chain folds BN
      // first, then the affine layer after it, into the same weights.
      "fold-batchnorm",
      "fold-scale-into-conv",
      // The N-D MatMul's form (Whisper's and CLIP's query scaled after its projection): the
      // query becomes a MatMul + bias like the key and value, which O3 then merges.
      "fold-scale-into-matmul",
      // Branches summed (RepVGG-style 3×3 + 1×1 + identity, a detector's parallel 3×3s): one
      // contraction over the summed weights, once the folds above left each branch one
      // contraction with its final weights.
      "merge-summed-contractions",
      // Last: a MatMul whose BatchNormalization folded is a Gemm already; the remaining
      // MatMul + bias Add pairs meet their final weights.
      "matmul-add-to-gemm",
      // Near the end, on the final constants: shared initializers make more nodes read the
      // same Values, so CSE (which also merges equal Constant nodes) finds more to merge.
      "share-duplicate-initializers",
      "eliminate-common-subexpressions",
      // Orphans the rewrites above left (their shape and weight operands).
      "eliminate-dead-code",
  };
  return passes;
}

const std::vector<std::string>& LevelTwo() {
  static const std::vector<std::string> passes = {
      // QOperator ops become the QDQ units the quantized fusions below take.
      "qoperator-to-qdq",
      // Quantized units first: a contraction between DequantizeLinear and QuantizeLinear is one
      // integer kernel, which the float epilogue pass would otherwise take as a float one.
      "fuse-quantized-contractions",
      // Epilogues next: a contraction takes its bias, residual and activation — GELU and SiLU
      // included — into one oneDNN call with post-ops. Were the composites first, a GELU after
      // MatMul+bias would become its own kernel next to the MatMul's.
      "fuse-contraction-epilogues",
      // Then the composites: LayerNorm/RMSNorm (with a residual Add the epilogues left), Softmax
      // with its scale and mask, and GELU/SiLU not after a contraction, claimed whole before
      // the elementwise pass could split them into pieces no row kernel runs.
      "fuse-composites",
      // BatchNormalizations no contraction absorbed at O1 (DenseNet's pre-activation) become a
      // per-channel Mul and Add here, not at O1: there they would cost two kernels instead of
      // one; here the elementwise fusion right after takes them with their activation.
      "lower-batchnorm",
      // Last fusion: whatever elementwise ops the patterns above left, in maximal groups.
      "fuse-elementwise",
      "eliminate-dead-code",
  };
  return passes;
}

// O3's own passes run between O1 and O2's vertical fusions: they regroup contractions and
// claim whole attention blocks, which the epilogue, composite and elementwise passes would
// otherwise split into pieces (a Softmax with its mask, a MatMul with its bias).
const std::vector<std::string>& LevelThreeBeforeVertical() {
  static const std::vector<std::string> passes = {
      // Q/K/V (and any contractions sharing an input) become one contraction + Split while
      // their bias Adds are still separate ops that can move below the Split with them.
      "fuse-horizontal-contractions",
      // Then whole attention blocks, the merged Q/K/V Split included, before the composite
      // pass could claim their Softmax and the epilogue pass their MatMuls.
      "fuse-attention",
  };
  return passes;
}

// After O2's vertical fusions: independent elementwise kernels (fused groups included) over
// one iteration space merge into one multi-output kernel.
const std::vector<std::string>& LevelThreeAfterVertical() {
  static const std::vector<std::string> passes = {
      "fuse-horizontal-elementwise",
      // The functions of the fused calls it inlined are no longer called.
      "eliminate-dead-code",
  };
  return passes;
}

}  // namespace

const std::vector<PassInfo>& AllPasses() {
  static const std::vector<PassInfo> passes = {
      Describe<EliminateDeadCode>(1),
      Describe<FoldConstants>(1),
      Describe<EliminateNoOps>(1),
      Describe<DropQdqAroundDataMovement>(1),
      Describe<QuantizeConcatInputs>(1),
      Describe<GathersToSlices>(1),
      Describe<SlicesToSplit>(1),
      Describe<SinkViews>(1),
      Describe<CommuteTransposes>(1),
      Describe<UnflattenBatchMatmuls>(1),
      Describe<MergeReshapes>(1),
      Describe<FoldBatchNorm>(1),
      Describe<FoldScaleIntoConv>(1),
      Describe<FoldScaleIntoMatMul>(1),
      Describe<MergeSummedContractions>(1),
      Describe<MatMulAddToGemm>(1),
      Describe<ShareDuplicateInitializers>(1),
      Describe<EliminateCommonSubexpressions>(1),
      Describe<QOperatorToQdq>(2),
      Describe<FuseQuantizedContractions>(2),
      Describe<FuseContractionEpilogues>(2),
      Describe<FuseComposites>(2),
      Describe<LowerBatchNorm>(2),
      Describe<FuseElementwise>(2),
      Describe<FuseHorizontalContractions>(3),
      Describe<FuseHorizontalElementwise>(3),
      Describe<FuseAttention>(3),
      DescribeConversion<LowerForOrtPass>("ort"),
  };
  return passes;
}

const PassInfo* FindPass(std::string_view name) {
  for (const PassInfo& info : AllPasses()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::vector<std::string> ConversionsFor(std::string_view runtime) {
  std::vector<std::string> conversions;
  for (const PassInfo& info : AllPasses()) {
    if (!runtime.empty() && info.runtime == runtime) conversions.push_back(info.name);
  }
  return conversions;
}

std::vector<std::string> PipelineFor(int level) {
  std::vector<std::string> pipeline;
  if (level >= 1) pipeline = LevelOne();
  if (level >= 3) {
    pipeline.insert(pipeline.end(), LevelThreeBeforeVertical().begin(), LevelThreeBeforeVertical().end());
  }
  if (level >= 2) pipeline.insert(pipeline.end(), LevelTwo().begin(), LevelTwo().end());
  if (level >= 3) {
    pipeline.insert(pipeline.end(), LevelThreeAfterVertical().begin(), LevelThreeAfterVertical().end());
  }
  return pipeline;
}

}  // namespace fusionopt::passes
