// Shared by the CPU runtime's tests: tensors built from literal values, values read back, and
// models written as IR text prepared and run.
#pragma once

#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "cpu_runtime/engine/session.h"
#include "ir/float16.h"
#include "text_format/text_format.h"

namespace fusionopt::cpu_test {

using cpu::NamedTensor;
using cpu::RtTensor;

// `values` copied as they are: T must be `dtype`'s element type (uint8_t for bool, uint16_t
// for float16 bits); exact where a double is not (int64 beyond 2^53).
template <typename T>
RtTensor Make(DataType dtype, std::vector<int64_t> dims, const std::vector<T>& values) {
  RtTensor tensor = RtTensor::Allocate(dtype, std::move(dims));
  REQUIRE(static_cast<int64_t>(values.size()) == tensor.NumElements());
  if (!values.empty()) std::memcpy(tensor.raw(), values.data(), values.size() * sizeof(T));
  return tensor;
}

// `values` converted to `dtype`.
inline RtTensor Filled(DataType dtype, std::vector<int64_t> dims, const std::vector<double>& values) {
  RtTensor tensor = RtTensor::Allocate(dtype, std::move(dims));
  REQUIRE(static_cast<int64_t>(values.size()) == tensor.NumElements());
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DataType::kFloat: tensor.data<float>()[i] = static_cast<float>(values[i]); break;
      case DataType::kDouble: tensor.data<double>()[i] = values[i]; break;
      case DataType::kFloat16: tensor.data<uint16_t>()[i] = FloatToHalf(static_cast<float>(values[i])); break;
      case DataType::kInt32: tensor.data<int32_t>()[i] = static_cast<int32_t>(values[i]); break;
      case DataType::kInt64: tensor.data<int64_t>()[i] = static_cast<int64_t>(values[i]); break;
      case DataType::kBool: tensor.data<uint8_t>()[i] = values[i] != 0; break;
      default: FAIL("no filler for " << NameOf(dtype));
    }
  }
  return tensor;
}

// A float tensor; `values` may be floats or doubles (a braced list is read as doubles).
template <typename T = double>
RtTensor Floats(std::vector<int64_t> dims, const std::vector<T>& values) {
  return Filled(DataType::kFloat, std::move(dims), std::vector<double>(values.begin(), values.end()));
}

// 0, 1, 2, ... as floats in the shape `dims`.
inline RtTensor Iota(std::vector<int64_t> dims) {
  RtTensor tensor = RtTensor::Allocate(DataType::kFloat, std::move(dims));
  std::iota(tensor.data<float>(), tensor.data<float>() + tensor.NumElements(), 0.0f);
  return tensor;
}

inline std::vector<double> Values(const RtTensor& tensor) {
  std::vector<double> out;
  for (int64_t i = 0; i < tensor.NumElements(); ++i) out.push_back(tensor.ValueAsDouble(i));
  return out;
}

// The model exactly as written; REQUIREs that it parses.
inline std::unique_ptr<Model> Parse(const std::string& text) {
  auto model = ParseModel(text);
  INFO(model.status().message());
  REQUIRE(model.ok());
  return std::move(model).value();
}

// The session points into the model, so both live together.
struct Prepared {
  std::unique_ptr<Model> model;
  std::unique_ptr<cpu::Session> session;
};

// Parsed (REQUIREd) and prepared (REQUIREd).
inline Prepared Prepare(const std::string& text, const cpu::SessionOptions& options = {}) {
  std::unique_ptr<Model> model = Parse(text);
  auto session = cpu::Session::Create(*model, options);
  INFO(session.status().message());
  REQUIRE(session.ok());
  return {std::move(model), std::move(session).value()};
}

// The status of preparing the model (attribute errors surface here); the text must parse.
inline Status CreateStatus(const std::string& text) { return cpu::Session::Create(*Parse(text)).status(); }

// The error preparing the model must give.
inline std::string CreateError(const std::string& text) {
  Status status = CreateStatus(text);
  REQUIRE_FALSE(status.ok());
  return status.message();
}

// Parsed (REQUIREd), then the error of preparing or running it, or the outputs.
inline Result<std::vector<NamedTensor>> TryRun(const std::string& text, const std::vector<NamedTensor>& feeds,
                                               cpu::RunStats* stats = nullptr,
                                               const cpu::SessionOptions& options = {}) {
  INFO(text);
  std::unique_ptr<Model> model = Parse(text);
  auto session = cpu::Session::Create(*model, options);
  if (!session.ok()) return session.status();
  return (*session)->Run(feeds, stats);
}

inline std::vector<NamedTensor> Run(const std::string& text, const std::vector<NamedTensor>& feeds,
                                    const cpu::SessionOptions& options, cpu::RunStats* stats = nullptr) {
  auto outputs = Prepare(text, options).session->Run(feeds, stats);
  INFO(outputs.status().message());
  REQUIRE(outputs.ok());
  return std::move(outputs).value();
}

inline std::vector<NamedTensor> Run(const std::string& text, const std::vector<NamedTensor>& feeds = {},
                                    cpu::RunStats* stats = nullptr) {
  return Run(text, feeds, cpu::SessionOptions{}, stats);
}

// `actual` has shape `dims` and the `expected` values within 1e-6.
inline void CheckClose(const RtTensor& actual, const std::vector<int64_t>& dims, const std::vector<double>& expected) {
  REQUIRE(actual.dims() == dims);
  std::vector<double> values = Values(actual);
  REQUIRE(values.size() == expected.size());
  for (size_t i = 0; i < values.size(); ++i) CHECK(values[i] == Approx(expected[i]).margin(1e-6));
}

}  // namespace fusionopt::cpu_test
