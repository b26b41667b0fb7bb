// What `fusionopt inspect` reports about a model, computed from the IR.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace fusionopt {

struct ValueSummary {
  std::string name;
  ValueType type;
};

struct ModelSummary {
  // Graph inputs that are not initializers (IR < 4 models list weights as inputs too).
  std::vector<ValueSummary> inputs;
  std::vector<ValueSummary> outputs;
  int64_t node_count = 0;        // main graph
  int64_t total_node_count = 0;  // including If/Loop/Scan bodies
  // domain ("" = ai.onnx) → op type → count, over all nodes including subgraphs.
  std::map<std::string, std::map<std::string, int64_t>> op_histogram;
  int64_t initializer_count = 0;  // main graph
  int64_t parameter_count = 0;    // elements of the main graph's initializers
  uint64_t parameter_bytes = 0;
  int64_t subgraph_count = 0;
};

ModelSummary Summarize(const Model& model);

}  // namespace fusionopt
