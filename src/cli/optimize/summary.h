// The table `fusionopt optimize` prints on stderr: op counts by type, nodes, estimated kernel
// launches and model size, before and after (like onnxsim / onnxslim print).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ir/graph.h"

namespace fusionopt::cli {

struct OptimizeSummary {
  std::map<std::string, int64_t> ops;  // "Add", "ai.fusionopt::FusedLayerNorm", ...
  int64_t nodes = 0;
  int64_t launches = 0;
  uint64_t bytes = 0;
};

OptimizeSummary SummarizeForOptimize(const Model& model);
uint64_t FileBytes(const std::string& path);
// Bytes of the external data files the loaded model reads (its size on disk beyond the .onnx).
uint64_t ExternalBytes(const Model& model);

void PrintOptimizeSummary(const std::string& input, const std::string& output, int level,
                          const OptimizeSummary& before, const OptimizeSummary& after, double seconds);

}  // namespace fusionopt::cli
