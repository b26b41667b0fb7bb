// ModelProto → Model. Validates what every later stage relies on and names the problem.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include "ir/legacy_opsets.h"
#include "shape_inference/shape_inference.h"
#include "onnx_io/function_codec.h"
#include "onnx_io/model_io.h"
#include "onnx_io/node_signature.h"
#include "onnx_io/operator_schemas.h"
#include "onnx_io/proto_codec.h"

namespace fusionopt {
namespace {

constexpr int64_t kMinIrVersion = 3;
// IR 12-14 (onnx 1.19-1.23) added element types (float8e8m0, int2/uint2, float6) and nothing
// else the loader reads; their tensors are carried, and refused by whatever would compute them.
constexpr int64_t kMaxIrVersion = 14;
// Opsets 1-6 load too; the op versions of theirs that we would misread are refused after the
// graph is built (ir/legacy_opsets.h).
constexpr int64_t kMinOpset = 1;
// The newest opsets whose schemas fusionopt reads models against (onnx_io/operator_schemas.h):
// a version from the future means a toolchain whose model we cannot vouch for.
constexpr int64_t kMaxOpset = kNewestDefaultOpset;
constexpr int64_t kMaxMlOpset = kNewestMlOpset;
// Protobuf's default (100 nested messages) stops If/Loop nesting at about 30 levels, since a
// level nests three messages (graph, node, attribute). 400 admits about 130 levels; the
// loader and every pass recurse once per level, and a 1 MiB stack holds that.
constexpr int kMaxMessageDepth = 400;
constexpr int kReadBlockBytes = 4 << 20;

Status ParseFailure() {
  return InvalidModel("not a valid ONNX model (protobuf parsing failed: truncated, not a model, or "
                      "messages nested more than " + std::to_string(kMaxMessageDepth) + " deep)");
}

std::string Describe(const onnx::NodeProto& node) {
  std::string label = node.name().empty() ? "node" : "node '" + node.name() + "'";
  return label + " (" + (node.domain().empty() ? "" : node.domain() + "::") + node.op_type() + ")";
}

void ClearNodeModelled(onnx::NodeProto& proto) {
  proto.clear_input();
  proto.clear_output();
  proto.clear_op_type();
  proto.clear_attribute();
  // name and domain stay: the saver writes them only when they changed, which keeps an
  // explicitly empty field (has_domain with "") exactly as the file had it.
}

void ClearGraphModelled(onnx::GraphProto& proto) {
  proto.clear_node();
  proto.clear_initializer();
  proto.clear_input();
  proto.clear_output();
  proto.clear_value_info();
}

void ClearValueInfoModelled(onnx::ValueInfoProto& proto) {
  proto.clear_name();
  proto.clear_type();
}

void ClearAttributeModelled(onnx::AttributeProto& proto) {
  proto.clear_name();
  proto.clear_type();
  proto.clear_f();
  proto.clear_i();
  proto.clear_s();
  proto.clear_t();
  proto.clear_g();
  proto.clear_floats();
  proto.clear_ints();
  proto.clear_strings();
  proto.clear_tensors();
  proto.clear_graphs();
  proto.clear_ref_attr_name();
}

void ClearReferenceModelled(onnx::AttributeProto& proto) {
  proto.clear_name();
  proto.clear_type();
  proto.clear_ref_attr_name();
}

void ClearModelModelled(onnx::ModelProto& proto) {
  proto.clear_ir_version();
  proto.clear_opset_import();
  proto.clear_metadata_props();
  proto.clear_functions();
  proto.clear_graph();
}

// Old exporters leave AttributeProto.type unset; infer it from the field that is set.
onnx::AttributeProto::AttributeType EffectiveType(const onnx::AttributeProto& proto) {
  using A = onnx::AttributeProto;
  if (proto.type() != A::UNDEFINED) return proto.type();
  if (proto.has_f()) return A::FLOAT;
  if (proto.has_i()) return A::INT;
  if (proto.has_s()) return A::STRING;
  if (proto.has_t()) return A::TENSOR;
  if (proto.has_g()) return A::GRAPH;
  if (proto.floats_size() > 0) return A::FLOATS;
  if (proto.ints_size() > 0) return A::INTS;
  if (proto.strings_size() > 0) return A::STRINGS;
  if (proto.tensors_size() > 0) return A::TENSORS;
  if (proto.graphs_size() > 0) return A::GRAPHS;
  return A::UNDEFINED;
}

// The opset version a graph imports for a domain: the model's for the main graph, the
// function's for a function body (and, either way, for their subgraphs).
using OpsetLookup = std::function<std::optional<int64_t>(std::string_view domain)>;

// The IR kind of an attribute type; nullopt for the kinds kept opaque (sparse tensors,
// type protos).
std::optional<AttributeKind> KindOf(onnx::AttributeProto::AttributeType type) {
  using A = onnx::AttributeProto;
  switch (type) {
    case A::UNDEFINED: return AttributeKind::kUndefined;
    case A::FLOAT: return AttributeKind::kFloat;
    case A::INT: return AttributeKind::kInt;
    case A::STRING: return AttributeKind::kString;
    case A::FLOATS: return AttributeKind::kFloats;
    case A::INTS: return AttributeKind::kInts;
    case A::STRINGS: return AttributeKind::kStrings;
    case A::TENSOR: return AttributeKind::kTensor;
    case A::TENSORS: return AttributeKind::kTensors;
    case A::GRAPH: return AttributeKind::kGraph;
    case A::GRAPHS: return AttributeKind::kGraphs;
    default: return std::nullopt;
  }
}

class GraphBuilder {
 public:
  GraphBuilder(OpsetLookup opset_for, ExternalDataResolver& resolver)
      : opset_for_(std::move(opset_for)), resolver_(resolver) {}

  Result<std::unique_ptr<Graph>> Build(onnx::GraphProto& proto, Node* owner) {
    auto graph = std::make_unique<Graph>();
    if (owner != nullptr) graph->AttachTo(owner);
    graph->set_name(proto.name());
    FUSIONOPT_RETURN_IF_ERROR(AddInputsAndInitializers(proto, *graph));
    FUSIONOPT_RETURN_IF_ERROR(CreateNodeOutputs(proto, *graph));
    FUSIONOPT_RETURN_IF_ERROR(AddValueInfo(proto, *graph));
    FUSIONOPT_RETURN_IF_ERROR(CreateNodes(proto, *graph));
    FUSIONOPT_RETURN_IF_ERROR(AddOutputs(proto, *graph));
    FUSIONOPT_RETURN_IF_ERROR(CheckEveryReadIsDefined(*graph));
    FUSIONOPT_RETURN_IF_ERROR(graph->SortTopologically());
    graph->residual() = ResidualOf<onnx::GraphProto>(proto, ClearGraphModelled);
    return graph;
  }

 private:
  // value_info may name values nothing defines (kept for a lossless round trip), but nothing
  // may read them: a read needs a node, a graph input or an initializer behind it.
  static Status CheckEveryReadIsDefined(const Graph& graph) {
    for (const Value* value : graph.AllValues()) {
      if (value->producer() != nullptr || value->is_graph_input() || value->is_initializer()) continue;
      if (value->is_graph_output()) {
        return InvalidModel("graph output '" + value->name() + "' is not produced by any node");
      }
      if (!value->uses().empty()) {
        const Node& reader = *value->uses().front().node;
        return InvalidModel("node '" + reader.name() + "' (" + reader.op_type() + ") reads '" + value->name() +
                            "', which no node, input or initializer defines");
      }
    }
    return Status::Ok();
  }

  Status ApplyValueInfo(const onnx::ValueInfoProto& info, Value& value) {
    if (info.has_type()) {
      auto type = DecodeType(info.type());
      if (!type.ok()) return type.status().WithContext("value '" + info.name() + "'");
      value.type() = type.value();
      value.set_declared_type(std::move(type).value());
    } else {
      value.set_declared_type(std::nullopt);
    }
    value.info_residual() = ResidualOf<onnx::ValueInfoProto>(info, ClearValueInfoModelled);
    return Status::Ok();
  }

  Status CheckNewName(const Graph& graph, const std::string& name, const std::string& what) {
    if (name.empty()) return InvalidModel(what + " has an empty name");
    if (graph.LookupValue(name) != nullptr) {
      return InvalidModel(what + " '" + name + "' is defined more than once");
    }
    return Status::Ok();
  }

  Status AddInputsAndInitializers(onnx::GraphProto& proto, Graph& graph) {
    if (proto.sparse_initializer_size() > 0) {
      return Unsupported("graph '" + proto.name() + "' uses sparse_initializer");
    }
    for (const auto& input : proto.input()) {
      FUSIONOPT_RETURN_IF_ERROR(CheckNewName(graph, input.name(), "graph input"));
      Value* value = graph.CreateValue(input.name());
      FUSIONOPT_RETURN_IF_ERROR(ApplyValueInfo(input, *value));
      graph.AddInput(value);
    }
    for (auto& initializer : *proto.mutable_initializer()) {
      Value* value = graph.FindValue(initializer.name());
      if (value == nullptr) {
        FUSIONOPT_RETURN_IF_ERROR(CheckNewName(graph, initializer.name(), "initializer"));
        value = graph.CreateValue(initializer.name());
      } else if (value->is_initializer()) {
        return InvalidModel("initializer '" + initializer.name() + "' is defined more than once");
      }
      auto tensor = DecodeTensor(initializer, resolver_);
      if (!tensor.ok()) return tensor.status().WithContext("initializer '" + initializer.name() + "'");
      if (!value->is_graph_input()) {
        value->type().dtype = tensor->dtype();
        Shape shape;
        for (int64_t dim : tensor->dims()) shape.push_back(Dim::Known(dim));
        value->type().shape = std::move(shape);
      }
      graph.SetInitializer(value, std::make_shared<const Tensor>(std::move(tensor).value()));
    }
    return Status::Ok();
  }

  Status CreateNodeOutputs(const onnx::GraphProto& proto, Graph& graph) {
    for (const auto& node : proto.node()) {
      for (const auto& output : node.output()) {
        if (output.empty()) continue;
        Status status = CheckNewName(graph, output, "value");
        if (!status.ok()) return status.WithContext(Describe(node));
        graph.CreateValue(output);
      }
    }
    return Status::Ok();
  }

  Status AddValueInfo(const onnx::GraphProto& proto, Graph& graph) {
    for (const auto& info : proto.value_info()) {
      Value* value = graph.FindValue(info.name());
      if (value == nullptr) {
        // value_info for a name nothing produces: keep it so the round trip is lossless.
        FUSIONOPT_RETURN_IF_ERROR(CheckNewName(graph, info.name(), "value_info"));
        value = graph.CreateValue(info.name());
      }
      if (value->has_declared_type()) {
        return InvalidModel("value_info for '" + info.name() + "' appears more than once");
      }
      FUSIONOPT_RETURN_IF_ERROR(ApplyValueInfo(info, *value));
      value->MarkDeclared();
    }
    return Status::Ok();
  }

  Status CreateNodes(onnx::GraphProto& proto, Graph& graph) {
    for (auto& node_proto : *proto.mutable_node()) {
      Status status = CreateNode(node_proto, graph);
      if (!status.ok()) return status;
    }
    return Status::Ok();
  }

  Status CreateNode(onnx::NodeProto& proto, Graph& graph) {
    if (proto.op_type().empty()) return InvalidModel(Describe(proto) + " has no op_type");
    if (!opset_for_(proto.domain())) {
      return InvalidModel(Describe(proto) + " uses domain '" + proto.domain() +
                          "' that has no opset_import");
    }
    Status signature = CheckNodeSignature(proto, *opset_for_(proto.domain()));
    if (!signature.ok()) return InvalidModel(Describe(proto) + " " + signature.message());
    std::vector<Value*> inputs;
    for (const auto& name : proto.input()) {
      if (name.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      Value* value = graph.LookupValue(name);
      if (value == nullptr) {
        return InvalidModel(Describe(proto) + " reads '" + name + "', which no node, input or " +
                            "initializer defines");
      }
      inputs.push_back(value);
    }
    std::vector<Value*> outputs;
    for (const auto& name : proto.output()) {
      outputs.push_back(name.empty() ? nullptr : graph.FindValue(name));
    }
    Node* node = graph.CreateNode(proto.op_type(), proto.domain(), inputs, outputs, proto.name());
    for (auto& attribute_proto : *proto.mutable_attribute()) {
      auto attribute = DecodeAttribute(attribute_proto, node);
      if (!attribute.ok()) return attribute.status().WithContext(Describe(proto));
      node->mutable_attributes().push_back(std::move(attribute).value());
    }
    node->residual() = ResidualOf<onnx::NodeProto>(proto, ClearNodeModelled);
    return Status::Ok();
  }

  Result<TensorPtr> DecodeTensorAttribute(onnx::TensorProto& proto, const std::string& name) {
    auto tensor = DecodeTensor(proto, resolver_);
    if (!tensor.ok()) return tensor.status().WithContext("attribute '" + name + "'");
    return TensorPtr(std::make_shared<const Tensor>(std::move(tensor).value()));
  }

  Result<Attribute> DecodeAttribute(onnx::AttributeProto& proto, Node* node) {
    const bool is_reference = !proto.ref_attr_name().empty();
    // A reference keeps the type as written: inferring one from stray value fields would
    // add a type on save.
    std::optional<AttributeKind> kind = KindOf(is_reference ? proto.type() : EffectiveType(proto));
    Attribute attribute;
    attribute.name = proto.name();
    if (!kind) {  // sparse tensors and type protos: carried through untouched
      attribute.kind = AttributeKind::kOpaque;
      attribute.residual = proto.SerializeAsString();
      return attribute;
    }
    attribute.kind = *kind;
    if (is_reference) {
      // A function body's reference to a formal attribute has no value of its own.
      attribute.ref_attr_name = proto.ref_attr_name();
      attribute.residual = ResidualOf<onnx::AttributeProto>(proto, ClearReferenceModelled);
      return attribute;
    }
    FUSIONOPT_RETURN_IF_ERROR(DecodeAttributeValue(proto, node, attribute));
    attribute.residual = ResidualOf<onnx::AttributeProto>(proto, ClearAttributeModelled);
    return attribute;
  }

  Status DecodeAttributeValue(onnx::AttributeProto& proto, Node* node, Attribute& attribute) {
    switch (attribute.kind) {
      case AttributeKind::kFloat: attribute.f = proto.f(); break;
      case AttributeKind::kInt: attribute.i = proto.i(); break;
      case AttributeKind::kString: attribute.s = proto.s(); break;
      case AttributeKind::kFloats: attribute.floats.assign(proto.floats().begin(), proto.floats().end()); break;
      case AttributeKind::kInts: attribute.ints.assign(proto.ints().begin(), proto.ints().end()); break;
      case AttributeKind::kStrings:
        attribute.strings.assign(proto.strings().begin(), proto.strings().end());
        break;
      case AttributeKind::kTensor: {
        FUSIONOPT_ASSIGN_OR_RETURN(attribute.t, DecodeTensorAttribute(*proto.mutable_t(), proto.name()));
        break;
      }
      case AttributeKind::kTensors:
        for (auto& tensor : *proto.mutable_tensors()) {
          FUSIONOPT_ASSIGN_OR_RETURN(auto decoded, DecodeTensorAttribute(tensor, proto.name()));
          attribute.tensors.push_back(std::move(decoded));
        }
        break;
      case AttributeKind::kGraph: {
        auto graph = Build(*proto.mutable_g(), node);
        if (!graph.ok()) return graph.status().WithContext("subgraph '" + proto.name() + "'");
        attribute.g = std::move(graph).value();
        break;
      }
      case AttributeKind::kGraphs:
        for (auto& graph_proto : *proto.mutable_graphs()) {
          auto graph = Build(graph_proto, node);
          if (!graph.ok()) return graph.status().WithContext("subgraph '" + proto.name() + "'");
          attribute.graphs.push_back(std::move(graph).value());
        }
        break;
      case AttributeKind::kUndefined:
        return InvalidModel("attribute '" + proto.name() + "' has no type and no value");
      case AttributeKind::kOpaque: break;
    }
    return Status::Ok();
  }

  Status AddOutputs(const onnx::GraphProto& proto, Graph& graph) {
    std::set<std::string> seen;
    for (const auto& output : proto.output()) {
      if (!seen.insert(output.name()).second) {
        return InvalidModel("graph output '" + output.name() + "' is listed more than once");
      }
      Value* value = graph.LookupValue(output.name());

      if (value == nullptr) {
        return InvalidModel("graph output '" + output.name() + "' is not produced by any node");
      }
      if (value->graph() != &graph) {
        return Unsupported("subgraph output '" + output.name() + "' is an outer-scope value");
      }
      // A pass-through output (also an input) keeps the input's declaration.
      if (!value->is_graph_input()) FUSIONOPT_RETURN_IF_ERROR(ApplyValueInfo(output, *value));
      graph.AddOutput(value);
    }
    return Status::Ok();
  }

  OpsetLookup opset_for_;
  ExternalDataResolver& resolver_;
};

Status CheckVersions(const onnx::ModelProto& proto) {
  if (!proto.has_ir_version()) return InvalidModel("the model has no ir_version");
  if (proto.ir_version() < kMinIrVersion || proto.ir_version() > kMaxIrVersion) {
    return Unsupported("IR version " + std::to_string(proto.ir_version()) +
                       " is not supported (supported: " + std::to_string(kMinIrVersion) + "-" +
                       std::to_string(kMaxIrVersion) + ")");
  }
  if (!proto.has_graph()) return InvalidModel("the model has no graph");
  if (proto.opset_import_size() == 0) return InvalidModel("the model has no opset_import");
  std::set<std::string> domains;
  for (const auto& opset : proto.opset_import()) {
    std::string domain = opset.domain() == "ai.onnx" ? "" : opset.domain();
    if (!domains.insert(domain).second) {
      return InvalidModel("opset_import lists domain '" + opset.domain() + "' twice");
    }
    if (domain.empty() && (opset.version() < kMinOpset || opset.version() > kMaxOpset)) {
      return Unsupported("default-domain opset " + std::to_string(opset.version()) +
                         " is not supported (supported: " + std::to_string(kMinOpset) + "-" +
                         std::to_string(kMaxOpset) + ")");
    }
    if (domain == "ai.onnx.ml" && (opset.version() < 1 || opset.version() > kMaxMlOpset)) {
      return Unsupported("ai.onnx.ml opset " + std::to_string(opset.version()) +
                         " is not supported (supported: 1-" + std::to_string(kMaxMlOpset) + ")");
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<Model>> BuildModel(
    onnx::ModelProto& proto, const std::string& base_dir, const LoadOptions& options,
    std::optional<ExternalDataResolver::FileIdentity> model_file = std::nullopt) {
  FUSIONOPT_RETURN_IF_ERROR(CheckVersions(proto));
  auto model = std::make_unique<Model>();
  model->base_dir = base_dir;
  model->ir_version = proto.ir_version();
  for (const auto& opset : proto.opset_import()) model->opsets.push_back(DecodeOpset(opset));
  model->producer_name = proto.producer_name();
  model->producer_version = proto.producer_version();
  model->domain = proto.domain();
  model->model_version = proto.model_version();
  for (const auto& entry : proto.metadata_props()) {
    model->metadata.emplace_back(entry.key(), entry.value());
  }
  ExternalDataResolver resolver(base_dir, model_file);
  auto decode_body = [&resolver](onnx::GraphProto& body, const Function& function) {
    GraphBuilder body_builder([&function](std::string_view domain) { return function.OpsetFor(domain); }, resolver);
    return body_builder.Build(body, nullptr);
  };
  FUSIONOPT_RETURN_IF_ERROR(DecodeFunctions(proto, decode_body, *model));
  GraphBuilder builder([&model](std::string_view domain) { return model->OpsetFor(domain); }, resolver);
  auto graph = builder.Build(*proto.mutable_graph(), nullptr);
  if (!graph.ok()) return graph.status();
  model->graph = std::move(graph).value();
  model->external_data_files = resolver.OpenedLocations();
  model->residual = ResidualOf<onnx::ModelProto>(proto, ClearModelModelled);
  if (options.infer_shapes) InferShapes(*model);
  // After inference: whether legacy broadcasting agrees with numpy depends on input ranks.
  FUSIONOPT_RETURN_IF_ERROR(CheckLegacyOpsets(*model));
  return model;
}

bool ParseStreamed(int fd, onnx::ModelProto& proto) {
  // 4 MiB reads: the default 8 KiB blocks cost a BERT-base load 50k read calls.
  google::protobuf::io::FileInputStream stream(fd, kReadBlockBytes);
  google::protobuf::io::CodedInputStream coded(&stream);
  coded.SetTotalBytesLimit(INT32_MAX);
  coded.SetRecursionLimit(kMaxMessageDepth);
  return proto.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
}

// Parsing straight from the page cache saves copying a weight-heavy file through a read
// buffer first (a quarter of a BERT-base load). Anything mmap refuses is read as a stream.
bool ParseMapped(int fd, size_t size, onnx::ModelProto& proto) {
  void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (mapping == MAP_FAILED) return ParseStreamed(fd, proto);
  (void)::madvise(mapping, size, MADV_SEQUENTIAL);  // advice only
  (void)::madvise(mapping, size, MADV_WILLNEED);
  google::protobuf::io::CodedInputStream coded(static_cast<const uint8_t*>(mapping), static_cast<int>(size));
  coded.SetRecursionLimit(kMaxMessageDepth);
  bool parsed = proto.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
  ::munmap(mapping, size);
  return parsed;
}

}  // namespace

Result<std::unique_ptr<Model>> LoadModel(const std::string& path, const LoadOptions& options) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError(std::string("cannot open: ") + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || S_ISDIR(info.st_mode)) {
    ::close(fd);
    return IoError("is a directory, not a model file");
  }
  if (info.st_size == 0) {
    ::close(fd);
    return InvalidModel("the file is empty");
  }
  onnx::ModelProto proto;
  bool parsed = S_ISREG(info.st_mode) && info.st_size <= INT32_MAX
                    ? ParseMapped(fd, static_cast<size_t>(info.st_size), proto)
                    : ParseStreamed(fd, proto);
  ::close(fd);
  if (!parsed) return ParseFailure();
  std::string base_dir = std::filesystem::path(path).parent_path().string();
  ExternalDataResolver::FileIdentity model_file{static_cast<uint64_t>(info.st_dev),
                                                static_cast<uint64_t>(info.st_ino)};
  return BuildModel(proto, base_dir.empty() ? "." : base_dir, options, model_file);
}

Result<std::unique_ptr<Model>> LoadModelFromBytes(std::string bytes, const std::string& base_dir,
                                                  const LoadOptions& options) {
  onnx::ModelProto proto;
  if (bytes.empty()) return InvalidModel("the model is empty");
  google::protobuf::io::CodedInputStream coded(reinterpret_cast<const uint8_t*>(bytes.data()),
                                               static_cast<int>(std::min<size_t>(bytes.size(), INT32_MAX)));
  coded.SetRecursionLimit(kMaxMessageDepth);
  if (!proto.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) return ParseFailure();
  bytes.clear();
  return BuildModel(proto, base_dir, options);
}

}  // namespace fusionopt
