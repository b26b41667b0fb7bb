#include "onnx_io/tensor_files.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "ir/atomic_file.h"
#include "onnx_io/proto_codec.h"

namespace fusionopt {
namespace {

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot open '" + path + "'");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// NumPy dtype descriptors ('<f4', '|b1', ...) for the types ONNX and NumPy share.
std::optional<DataType> NpyDtype(const std::string& descr) {
  static const std::map<std::string, DataType> kTypes = {
      {"<f4", DataType::kFloat}, {"<f8", DataType::kDouble}, {"<f2", DataType::kFloat16},
      {"<i8", DataType::kInt64}, {"<i4", DataType::kInt32}, {"<i2", DataType::kInt16},
      {"|i1", DataType::kInt8}, {"<u8", DataType::kUint64}, {"<u4", DataType::kUint32},
      {"<u2", DataType::kUint16}, {"|u1", DataType::kUint8}, {"|b1", DataType::kBool}};
  auto it = kTypes.find(descr);
  return it == kTypes.end() ? std::nullopt : std::optional<DataType>(it->second);
}

// The value of `key` in the .npy header dict, e.g. 'descr': '<f4' -> <f4.
std::string HeaderField(const std::string& header, const std::string& key) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) return {};
  size_t colon = header.find(':', at);
  if (colon == std::string::npos) return {};
  size_t begin = header.find_first_not_of(" ", colon + 1);
  if (begin == std::string::npos) return {};
  if (header[begin] == '\'') {
    size_t end = header.find('\'', begin + 1);
    return end == std::string::npos ? std::string() : header.substr(begin + 1, end - begin - 1);
  }
  if (header[begin] == '(') {
    size_t end = header.find(')', begin);
    return end == std::string::npos ? std::string() : header.substr(begin + 1, end - begin - 1);
  }
  size_t end = header.find_first_of(",}", begin);
  return header.substr(begin, end - begin);
}

Result<TensorPtr> ParseNpy(const std::string& bytes, const std::string& path) {
  auto bad = [&](const std::string& why) { return InvalidModel("'" + path + "' is not a supported .npy file: " + why); };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return bad("missing the NUMPY magic");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_length, header_start;
  if (major == 1) {
    header_length = static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    header_start = 10;
  } else {
    if (bytes.size() < 12) return bad("truncated header");
    header_length = 0;
    for (int i = 0; i < 4; ++i) header_length |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    header_start = 12;
  }
  if (header_start + header_length > bytes.size()) return bad("truncated header");
  std::string header = bytes.substr(header_start, header_length);
  auto dtype = NpyDtype(HeaderField(header, "descr"));
  if (!dtype) return bad("dtype '" + HeaderField(header, "descr") + "' is not supported");
  if (HeaderField(header, "fortran_order") != "False") return bad("Fortran order is not supported");
  std::vector<int64_t> dims;
  std::stringstream shape(HeaderField(header, "shape"));
  std::string item;
  uint64_t count = 1;
  while (std::getline(shape, item, ',')) {
    if (item.find_first_not_of(" ") == std::string::npos) continue;
    try {
      dims.push_back(std::stoll(item));
    } catch (...) {
      return bad("bad shape");
    }
    if (dims.back() < 0) return bad("negative dimension");
    count *= static_cast<uint64_t>(dims.back());
  }
  uint64_t expected = ByteSizeOf(*dtype, count);
  size_t data_start = header_start + header_length;
  if (bytes.size() - data_start != expected) {
    return bad("holds " + std::to_string(bytes.size() - data_start) + " bytes of data, expected " + std::to_string(expected));
  }
  std::vector<uint8_t> data(bytes.begin() + static_cast<long>(data_start), bytes.end());
  return TensorPtr(std::make_shared<Tensor>(Tensor::Owned(*dtype, std::move(dims), std::move(data))));
}

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Result<TensorPtr> ReadTensorFile(const std::string& path, std::string* name) {
  FUSIONOPT_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
  if (EndsWith(path, ".npy")) {
    if (name != nullptr) name->clear();
    return ParseNpy(bytes, path);
  }
  onnx::TensorProto proto;
  if (bytes.empty() || !proto.ParseFromString(bytes)) {
    return InvalidModel("'" + path + "' is not a serialized TensorProto");
  }
  if (name != nullptr) *name = proto.name();
  std::string folder = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  ExternalDataResolver resolver(folder);
  auto tensor = DecodeTensor(proto, resolver);
  if (!tensor.ok()) return tensor.status().WithContext("'" + path + "'");
  return TensorPtr(std::make_shared<Tensor>(std::move(tensor).value()));
}

Status WriteTensorProtoFile(const Tensor& tensor, const std::string& name, const std::string& path) {
  onnx::TensorProto proto;
  EncodeTensorHeader(tensor, proto);
  proto.set_name(name);
  EncodeTensorDataInline(tensor, proto);
  return WriteFileAtomically(path, proto.SerializeAsString());
}

}  // namespace fusionopt
