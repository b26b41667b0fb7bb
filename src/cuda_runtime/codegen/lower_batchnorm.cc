#include "cuda_runtime/codegen/lower_batchnorm.h"

#include <vector>

#include "cuda_runtime/codegen/typed_body.h"
#include "ir/batchnorm.h"
#include "ir/function_body.h"

namespace fusionopt::cuda {

std::unique_ptr<Graph> LowerBatchNormalization(const Graph& body) {
  bool any = false;
  for (const auto& node : body.nodes()) any = any || (node->op_type() == "BatchNormalization" && IsDefaultDomain(*node));
  if (!any) return nullptr;
  std::unique_ptr<Graph> copy = CopyGraph(body);
  std::vector<Node*> batchnorms;
  for (const auto& node : copy->nodes()) {
    if (node->op_type() == "BatchNormalization" && IsDefaultDomain(*node)) batchnorms.push_back(node.get());
  }
  bool rewritten = false;
  for (Node* batchnorm : batchnorms) {
    // A body has no graph inputs: its constant arguments are initializers (TypedBodyOf).
    Decided<BatchNormAsAffine> written = WriteBatchNormAsAffine(*copy, *batchnorm, kTypedBodyOpset, InitializerRule::kAllConstant);
    if (written) {
      copy->TransferProducer(batchnorm->output(0), written->add, 0);
      copy->RemoveNode(batchnorm);
      rewritten = true;
    }
  }
  return rewritten ? std::move(copy) : nullptr;
}

}  // namespace fusionopt::cuda
