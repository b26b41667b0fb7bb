// Fuzz target: the IR text parser (src/text_format/text_format.h) and printer. Bytes are parsed as
// IR text; a text that parses is printed in full (no elided tensors), parsed again and
// printed again. The printer is canonical, so the second parse must succeed and both prints
// must be identical; a difference, a crash or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "text_format/text_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fusionopt;
  auto model = ParseModel(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!model.ok()) return 0;
  PrintOptions full;
  full.max_literal_elements = -1;
  std::string printed = PrintModel(**model, full);
  auto reparsed = ParseModel(printed);
  if (!reparsed.ok()) {
    fuzz::Finding("the printed text does not parse", reparsed.status().message() + "\n" + printed);
  }
  std::string reprinted = PrintModel(**reparsed, full);
  if (reprinted != printed) {
    fuzz::Finding("printing is not canonical", "first:\n" + printed + "\nsecond:\n" + reprinted);
  }
  return 0;
}
