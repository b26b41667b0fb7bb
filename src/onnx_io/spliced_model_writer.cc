#include "onnx_io/spliced_model_writer.h"

#include <google/protobuf/io/coded_stream.h>

namespace fusionopt {
namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;

// Field numbers in onnx.proto.
constexpr int kModelGraphField = 7;
constexpr int kGraphInitializerField = 5;
constexpr int kTensorRawDataField = 9;
constexpr int kLengthDelimited = 2;
constexpr size_t kBufferedBytes = 1 << 20;

// Offset of the first top-level field numbered above `field` in a serialized message (its
// size if none is): where protobuf would have written field `field`.
size_t OffsetOfFirstFieldAbove(const std::string& bytes, int field) {
  CodedInputStream input(reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<int>(bytes.size()));
  while (true) {
    int offset = input.CurrentPosition();
    uint32_t tag = input.ReadTag();
    if (tag == 0 || static_cast<int>(tag >> 3) > field) return static_cast<size_t>(offset);
    uint64_t length = 0;
    bool skipped = false;
    switch (tag & 7) {
      case 0: skipped = input.ReadVarint64(&length); break;
      case 1: skipped = input.Skip(8); break;
      case 2: skipped = input.ReadVarint64(&length) && input.Skip(static_cast<int>(length)); break;
      case 5: skipped = input.Skip(4); break;
      default: break;
    }
    FUSIONOPT_CHECK(skipped, "protobuf's own serialization scans as wire format without groups");
  }
}

uint64_t FieldSize(uint64_t payload) {
  return 1 + CodedOutputStream::VarintSize64(payload) + payload;
}

// Small pieces gathered into one write; the held tensors' bytes go straight to the file.
class BufferedFileWriter {
 public:
  explicit BufferedFileWriter(AtomicFile& file) : file_(file) {}

  Status Append(const std::string& bytes, size_t begin, size_t end) {
    pending_.append(bytes, begin, end - begin);
    return pending_.size() >= kBufferedBytes ? Flush() : Status::Ok();
  }
  Status AppendFieldHeader(int field, uint64_t payload) {
    uint8_t header[1 + 10];
    header[0] = static_cast<uint8_t>((field << 3) | kLengthDelimited);
    uint8_t* end = CodedOutputStream::WriteVarint64ToArray(payload, header + 1);
    pending_.append(reinterpret_cast<const char*>(header), static_cast<size_t>(end - header));
    return Status::Ok();
  }
  Status AppendTensorBytes(const Tensor& tensor) {
    FUSIONOPT_RETURN_IF_ERROR(Flush());
    const auto& source = tensor.external_source();
    if (source) return file_.CopyRange(source->file->fd(), source->offset, tensor.nbytes(), tensor.bytes().data());
    return file_.Write(tensor.bytes().data(), tensor.nbytes());
  }
  Status Flush() {
    Status status = file_.Write(reinterpret_cast<const uint8_t*>(pending_.data()), pending_.size());
    pending_.clear();
    return status;
  }

 private:
  AtomicFile& file_;
  std::string pending_;
};

}  // namespace

SplicedModel::SplicedModel(onnx::ModelProto& model, const HeldTensorBytes& held) {
  std::unique_ptr<onnx::GraphProto> graph(model.release_graph());
  FUSIONOPT_CHECK(graph != nullptr, "the saver always writes a graph");
  google::protobuf::RepeatedPtrField<onnx::TensorProto> initializers;
  initializers.Swap(graph->mutable_initializer());

  model_bytes_ = model.SerializeAsString();
  model_split_ = OffsetOfFirstFieldAbove(model_bytes_, kModelGraphField);
  graph_bytes_ = graph->SerializeAsString();
  graph_split_ = OffsetOfFirstFieldAbove(graph_bytes_, kGraphInitializerField);
  graph_length_ = graph_bytes_.size();
  for (const onnx::TensorProto& proto : initializers) {
    Initializer& entry = initializers_.emplace_back();
    entry.bytes = proto.SerializeAsString();
    entry.length = entry.bytes.size();
    auto found = held.find(&proto);
    if (found != held.end()) {
      entry.held = found->second;
      entry.split = OffsetOfFirstFieldAbove(entry.bytes, kTensorRawDataField);
      entry.length += FieldSize(entry.held->nbytes());
    }
    graph_length_ += FieldSize(entry.length);
  }
  size_ = model_bytes_.size() + FieldSize(graph_length_);
}

Status SplicedModel::WriteTo(AtomicFile& file) const {
  BufferedFileWriter out(file);
  FUSIONOPT_RETURN_IF_ERROR(out.Append(model_bytes_, 0, model_split_));
  FUSIONOPT_RETURN_IF_ERROR(out.AppendFieldHeader(kModelGraphField, graph_length_));
  FUSIONOPT_RETURN_IF_ERROR(out.Append(graph_bytes_, 0, graph_split_));
  for (const Initializer& entry : initializers_) {
    FUSIONOPT_RETURN_IF_ERROR(out.AppendFieldHeader(kGraphInitializerField, entry.length));
    if (entry.held == nullptr) {
      FUSIONOPT_RETURN_IF_ERROR(out.Append(entry.bytes, 0, entry.bytes.size()));
      continue;
    }
    FUSIONOPT_RETURN_IF_ERROR(out.Append(entry.bytes, 0, entry.split));
    FUSIONOPT_RETURN_IF_ERROR(out.AppendFieldHeader(kTensorRawDataField, entry.held->nbytes()));
    FUSIONOPT_RETURN_IF_ERROR(out.AppendTensorBytes(*entry.held));
    FUSIONOPT_RETURN_IF_ERROR(out.Append(entry.bytes, entry.split, entry.bytes.size()));
  }
  FUSIONOPT_RETURN_IF_ERROR(out.Append(graph_bytes_, graph_split_, graph_bytes_.size()));
  FUSIONOPT_RETURN_IF_ERROR(out.Append(model_bytes_, model_split_, model_bytes_.size()));
  return out.Flush();
}

}  // namespace fusionopt
