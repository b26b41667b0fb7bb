// Model → ModelProto → file, via a temporary file renamed into place.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include "ir/atomic_file.h"
#include "onnx_io/function_codec.h"
#include "onnx_io/model_io.h"
#include "onnx_io/proto_codec.h"
#include "onnx_io/spliced_model_writer.h"

namespace fusionopt {
namespace {

constexpr uint64_t kHeldTensorBytes = 64 << 10;

namespace fs = std::filesystem;

class InlineSink : public TensorSink {
 public:
  Status Store(const Tensor& tensor, onnx::TensorProto& proto) override {
    EncodeTensorDataInline(tensor, proto);
    return Status::Ok();
  }
};

// Inline too, but large raw tensors are held aside for the spliced writer, which streams
// their bytes into the file instead of copying them into the proto first.
class HoldingSink : public TensorSink {
 public:
  Status Store(const Tensor& tensor, onnx::TensorProto& proto) override {
    bool raw = tensor.dtype() != DataType::kString && !tensor.typed_storage();
    if (raw && tensor.nbytes() >= kHeldTensorBytes) {
      held_[&proto] = &tensor;
    } else {
      EncodeTensorDataInline(tensor, proto);
    }
    return Status::Ok();
  }

  // Only the main graph's initializers are spliced; a held tensor anywhere else (a Constant's
  // value, a subgraph's initializer) gets its bytes in the proto after all.
  const HeldTensorBytes& KeepOnlyInitializersOf(onnx::GraphProto& graph) {
    HeldTensorBytes kept;
    for (onnx::TensorProto& proto : *graph.mutable_initializer()) {
      auto found = held_.find(&proto);
      if (found == held_.end()) continue;
      kept.insert(*found);
      held_.erase(found);
    }
    for (auto& [proto, tensor] : held_) EncodeTensorDataInline(*tensor, *proto);
    held_.clear();
    kept_ = std::move(kept);
    return kept_;
  }

 private:
  std::unordered_map<onnx::TensorProto*, const Tensor*> held_;
  HeldTensorBytes kept_;
};

// Appends tensors at or above a size threshold to one data file (64-byte aligned so a
// runtime can map them directly); smaller ones stay inline.
class ExternalSink : public TensorSink {
 public:
  ExternalSink(AtomicFile& file, std::string location, uint64_t threshold)
      : file_(file), location_(std::move(location)), threshold_(threshold) {}

  Status Store(const Tensor& tensor, onnx::TensorProto& proto) override {
    if (tensor.dtype() == DataType::kString || tensor.nbytes() < threshold_) {
      EncodeTensorDataInline(tensor, proto);
      return Status::Ok();
    }
    static constexpr uint8_t kPadding[64] = {};
    uint64_t padding = (64 - file_.size() % 64) % 64;
    FUSIONOPT_RETURN_IF_ERROR(file_.Write(kPadding, padding));
    uint64_t offset = file_.size();
    const auto& source = tensor.external_source();
    if (source) {
      FUSIONOPT_RETURN_IF_ERROR(
          file_.CopyRange(source->file->fd(), source->offset, tensor.nbytes(), tensor.bytes().data()));
    } else {
      FUSIONOPT_RETURN_IF_ERROR(file_.Write(tensor.bytes().data(), tensor.nbytes()));
    }
    proto.set_data_location(onnx::TensorProto::EXTERNAL);
    AddEntry(proto, "location", location_);
    AddEntry(proto, "offset", std::to_string(offset));
    AddEntry(proto, "length", std::to_string(tensor.nbytes()));
    return Status::Ok();
  }

 private:
  static void AddEntry(onnx::TensorProto& proto, const std::string& key, const std::string& value) {
    auto* entry = proto.add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  }

  AtomicFile& file_;
  std::string location_;
  uint64_t threshold_;
};

class ProtoWriter {
 public:
  explicit ProtoWriter(TensorSink& sink) : sink_(&sink) {}

  Status EncodeModel(const Model& model, onnx::ModelProto& proto) {
    RestoreResidual(model.residual, proto);
    proto.set_ir_version(model.ir_version);
    for (const auto& opset : model.opsets) EncodeOpset(opset, *proto.add_opset_import());
    // The residual holds these as loaded (with their presence); write only changes.
    if (model.producer_name != proto.producer_name()) proto.set_producer_name(model.producer_name);
    if (model.producer_version != proto.producer_version()) proto.set_producer_version(model.producer_version);
    if (model.domain != proto.domain()) proto.set_domain(model.domain);
    if (model.model_version != proto.model_version()) proto.set_model_version(model.model_version);
    for (const auto& [key, value] : model.metadata) {
      auto* entry = proto.add_metadata_props();
      entry->set_key(key);
      entry->set_value(value);
    }
    for (const auto& function : model.functions) {
      FUSIONOPT_RETURN_IF_ERROR(EncodeFunction(*function, *proto.add_functions()));
    }
    return EncodeGraph(*model.graph, *proto.mutable_graph());
  }

  bool write_inferred_value_info = false;

 private:
  static void EncodeValueInfo(const Value& value, const ValueType* type,
                              onnx::ValueInfoProto& proto) {
    RestoreResidual(value.info_residual(), proto);
    proto.set_name(value.name());
    if (type != nullptr) EncodeType(*type, *proto.mutable_type());
  }

  // Declared values keep their declaration; values created by passes write what is known.
  static const ValueType* TypeToWrite(const Value& value) {
    if (value.is_declared()) return value.declared_type() ? &*value.declared_type() : nullptr;
    bool known = value.dtype() != DataType::kUndefined || !value.type().is_tensor();
    return known ? &value.type() : nullptr;
  }

  Status EncodeTensor(const Tensor& tensor, const std::string& name, onnx::TensorProto& proto) {
    EncodeTensorHeader(tensor, proto);
    if (!name.empty()) proto.set_name(name);
    return sink_->Store(tensor, proto);
  }

  Status EncodeGraph(const Graph& graph, onnx::GraphProto& proto) {
    RestoreResidual(graph.residual(), proto);
    if (graph.name() != proto.name()) proto.set_name(graph.name());
    for (const Node* node : NodesOf(graph)) FUSIONOPT_RETURN_IF_ERROR(EncodeNode(*node, *proto.add_node()));
    for (const Value* value : graph.initializers()) {
      FUSIONOPT_RETURN_IF_ERROR(EncodeTensor(*value->initializer(), value->name(), *proto.add_initializer()));
    }
    for (const Value* value : graph.inputs()) EncodeValueInfo(*value, TypeToWrite(*value), *proto.add_input());
    for (const Value* value : graph.outputs()) EncodeValueInfo(*value, TypeToWrite(*value), *proto.add_output());
    for (const Value* value : graph.IntermediateValuesInOrder()) {
      EncodeValueInfo(*value, TypeToWrite(*value), *proto.add_value_info());
    }
    if (write_inferred_value_info) AddInferredValueInfo(graph, proto);
    return Status::Ok();
  }

  static void AddInferredValueInfo(const Graph& graph, onnx::GraphProto& proto) {
    for (const Node* node : NodesOf(graph)) {
      for (const Value* value : node->outputs()) {
        if (value == nullptr || value->has_declared_type() || value->is_graph_output()) continue;
        if (value->dtype() == DataType::kUndefined) continue;
        EncodeValueInfo(*value, &value->type(), *proto.add_value_info());
      }
    }
  }

  static std::vector<const Node*> NodesOf(const Graph& graph) {
    std::vector<const Node*> out;
    for (const auto& node : graph.nodes()) out.push_back(node.get());
    return out;
  }

  // Function bodies keep their tensors inline: external data is a property of the model's
  // graph, and runtimes that inline functions do not all resolve it inside a body.
  Status EncodeFunction(const Function& function, onnx::FunctionProto& proto) {
    FUSIONOPT_CHECK(function.body->initializers().empty(),
                    DescribeFunction(function) + ": a FunctionProto cannot hold initializers");
    EncodeFunctionSignature(function, proto);
    InlineSink inline_sink;
    TensorSink* graph_sink = std::exchange(sink_, &inline_sink);
    Status status = Status::Ok();
    for (const Node* node : NodesOf(*function.body)) {
      status = EncodeNode(*node, *proto.add_node());
      if (!status.ok()) break;
    }
    sink_ = graph_sink;
    return status;
  }

  Status EncodeNode(const Node& node, onnx::NodeProto& proto) {
    RestoreResidual(node.residual(), proto);
    for (const Value* input : node.inputs()) proto.add_input(input ? input->name() : "");
    for (const Value* output : node.outputs()) proto.add_output(output ? output->name() : "");
    if (node.name() != proto.name()) proto.set_name(node.name());
    proto.set_op_type(node.op_type());
    if (node.domain() != proto.domain()) proto.set_domain(node.domain());
    for (const Attribute& attribute : node.attributes()) {
      FUSIONOPT_RETURN_IF_ERROR(EncodeAttribute(attribute, *proto.add_attribute()));
    }
    return Status::Ok();
  }

  static onnx::AttributeProto::AttributeType ProtoTypeOf(AttributeKind kind) {
    using A = onnx::AttributeProto;
    switch (kind) {
      case AttributeKind::kFloat: return A::FLOAT;
      case AttributeKind::kInt: return A::INT;
      case AttributeKind::kString: return A::STRING;
      case AttributeKind::kFloats: return A::FLOATS;
      case AttributeKind::kInts: return A::INTS;
      case AttributeKind::kStrings: return A::STRINGS;
      case AttributeKind::kTensor: return A::TENSOR;
      case AttributeKind::kTensors: return A::TENSORS;
      case AttributeKind::kGraph: return A::GRAPH;
      case AttributeKind::kGraphs: return A::GRAPHS;
      case AttributeKind::kUndefined: case AttributeKind::kOpaque: break;
    }
    return A::UNDEFINED;
  }

  Status EncodeAttribute(const Attribute& attribute, onnx::AttributeProto& proto) {
    if (attribute.kind == AttributeKind::kOpaque) {
      bool parsed = proto.ParseFromString(attribute.residual);
      FUSIONOPT_CHECK(parsed, "opaque attribute was serialized by the loader");
      return Status::Ok();
    }
    RestoreResidual(attribute.residual, proto);
    proto.set_name(attribute.name);
    if (attribute.kind != AttributeKind::kUndefined) proto.set_type(ProtoTypeOf(attribute.kind));
    if (!attribute.ref_attr_name.empty()) {
      // A function body's reference names the caller's attribute and carries no value.
      proto.set_ref_attr_name(attribute.ref_attr_name);
      return Status::Ok();
    }
    switch (attribute.kind) {
      case AttributeKind::kFloat: proto.set_f(attribute.f); break;
      case AttributeKind::kInt: proto.set_i(attribute.i); break;
      case AttributeKind::kString: proto.set_s(attribute.s); break;
      case AttributeKind::kFloats:
        for (float value : attribute.floats) proto.add_floats(value);
        break;
      case AttributeKind::kInts:
        for (int64_t value : attribute.ints) proto.add_ints(value);
        break;
      case AttributeKind::kStrings:
        for (const auto& value : attribute.strings) proto.add_strings(value);
        break;
      case AttributeKind::kTensor: return EncodeTensor(*attribute.t, "", *proto.mutable_t());
      case AttributeKind::kTensors:
        for (const auto& tensor : attribute.tensors) {
          FUSIONOPT_RETURN_IF_ERROR(EncodeTensor(*tensor, "", *proto.add_tensors()));
        }
        break;
      case AttributeKind::kGraph: return EncodeGraph(*attribute.g, *proto.mutable_g());
      case AttributeKind::kGraphs:
        for (const auto& graph : attribute.graphs) {
          FUSIONOPT_RETURN_IF_ERROR(EncodeGraph(*graph, *proto.add_graphs()));
        }
        break;
      case AttributeKind::kUndefined: case AttributeKind::kOpaque:
        break;
    }
    return Status::Ok();
  }

  TensorSink* sink_;
};

void SumTensorBytes(const Graph& graph, uint64_t& total) {
  for (const Value* value : graph.initializers()) total += value->initializer()->nbytes();
  for (const auto& node : graph.nodes()) {
    for (const Attribute& attribute : node->attributes()) {
      if (attribute.t) total += attribute.t->nbytes();
      for (const auto& tensor : attribute.tensors) total += tensor->nbytes();
    }
    for (const Graph* subgraph : node->Subgraphs()) SumTensorBytes(*subgraph, total);
  }
}

}  // namespace

Result<SaveReport> SaveModel(const Model& model, const std::string& path, const SaveOptions& options) {
  FUSIONOPT_CHECK(model.graph != nullptr, "a model always has a graph");
  SaveReport report;
  uint64_t tensor_bytes = 0;
  SumTensorBytes(*model.graph, tensor_bytes);
  report.external_data = options.external_data || tensor_bytes >= kAutoExternalDataBytes;
  report.external_data_forced = !options.external_data && report.external_data;

  std::unique_ptr<AtomicFile> data_file;
  std::unique_ptr<TensorSink> sink;
  HoldingSink* holding = nullptr;
  if (report.external_data) {
    std::string file_name = options.external_file_name.empty()
                                ? fs::path(path).filename().string() + ".data"
                                : options.external_file_name;
    if (fs::path(file_name).has_parent_path() || file_name == "." || file_name == "..") {
      return UsageError("external data file name '" + file_name + "' must be a plain file name");
    }
    report.data_file = (fs::path(path).parent_path() / file_name).string();
    if (fs::path(file_name) == fs::path(path).filename()) {
      return UsageError("the external data file would have the output's own name '" + file_name + "'");
    }
    FUSIONOPT_ASSIGN_OR_RETURN(data_file, AtomicFile::CreateFor(report.data_file));
    uint64_t threshold = report.external_data_forced ? 1024 : options.external_threshold_bytes;
    sink = std::make_unique<ExternalSink>(*data_file, file_name, threshold);
  } else {
    auto holding_sink = std::make_unique<HoldingSink>();
    holding = holding_sink.get();
    sink = std::move(holding_sink);
  }

  onnx::ModelProto proto;
  ProtoWriter writer(*sink);
  writer.write_inferred_value_info = options.write_inferred_value_info;
  FUSIONOPT_RETURN_IF_ERROR(writer.EncodeModel(model, proto));
  constexpr uint64_t kProtobufLimit = uint64_t{2} << 30;
  constexpr const char* kTooLarge = "the model is over 2 GiB even with external data; lower the threshold";
  HeldTensorBytes no_held;
  const HeldTensorBytes& held = holding ? holding->KeepOnlyInitializersOf(*proto.mutable_graph()) : no_held;
  if (proto.ByteSizeLong() >= kProtobufLimit) return Unsupported(kTooLarge);
  SplicedModel spliced(proto, held);
  if (spliced.size() >= kProtobufLimit) return Unsupported(kTooLarge);
  FUSIONOPT_ASSIGN_OR_RETURN(auto model_file, AtomicFile::CreateFor(path));
  FUSIONOPT_RETURN_IF_ERROR(spliced.WriteTo(*model_file));
  report.model_bytes = spliced.size();
  if (data_file) {
    report.external_bytes = data_file->size();
    // No tensor reached the threshold: leave no empty side file behind.
    if (report.external_bytes > 0) FUSIONOPT_RETURN_IF_ERROR(data_file->Commit());
    else report.external_data = false;
  }
  // The data file goes first so the model never names missing data; if the model cannot be
  // put in place, the data file written for it goes too.
  Status committed = model_file->Commit();
  if (!committed.ok() && report.external_data) std::remove(report.data_file.c_str());
  FUSIONOPT_RETURN_IF_ERROR(committed);
  return report;
}

Result<std::string> SerializeModel(const Model& model) {
  FUSIONOPT_CHECK(model.graph != nullptr, "a model always has a graph");
  uint64_t tensor_bytes = 0;
  SumTensorBytes(*model.graph, tensor_bytes);
  if (tensor_bytes >= kAutoExternalDataBytes) return Unsupported("the model's tensors are over protobuf's 2 GiB limit");
  InlineSink sink;
  onnx::ModelProto proto;
  ProtoWriter writer(sink);
  FUSIONOPT_RETURN_IF_ERROR(writer.EncodeModel(model, proto));
  return proto.SerializeAsString();
}

}  // namespace fusionopt
