// libFuzzer target for the graph parser. Any text must either parse or throw disc::Error; a graph
// that parses must verify, print, parse back to the same text, and stay valid through the passes.
// Anything else (a crash, a sanitizer report, another exception type, a round-trip mismatch) is
// a finding.
#include <cstdint>
#include <string_view>

#include "base/error.h"
#include "ir/pass.h"
#include "ir/text_format.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<disc::ir::Graph> g;
  try {
    g = disc::ir::parse_graph(text, "fuzz");
  } catch (const disc::Error&) {
    return 0;
  }
  disc::ir::verify(*g);
  std::string once = disc::ir::print_graph(*g);
  if (disc::ir::print_graph(*disc::ir::parse_graph(once, "reprint")) != once) __builtin_trap();
  disc::ir::PassManager pm;
  pm.add_list("canonicalize,cse,dce");
  pm.run(*g);  // verifies after every pass that changed the graph
  disc::ir::parse_graph(disc::ir::print_graph(*g), "after-passes");
  return 0;
}
