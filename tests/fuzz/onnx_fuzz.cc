// libFuzzer target for the ONNX importer (formats/onnx/import.h), through its public API only. Any
// bytes as a model must either import or throw disc::Error, holding only bounded memory (Knowns are
// capped); a model that imports must print, and become a trainable model or be refused with
// disc::Error. Anything else (a crash, a sanitizer report, another exception type) is a finding.
#include <cstdint>
#include <string_view>

#include "base/error.h"
#include "formats/onnx/import.h"
#include "ir/text_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    disc::onnx::Imported m = disc::onnx::import_bytes(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.onnx");
    (void)disc::ir::print_graph(*m.graph);
    (void)disc::onnx::language_model(m);
  } catch (const disc::Error&) {
  }
  return 0;
}
