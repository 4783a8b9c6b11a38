// A named dimension whose size is known only at run time, with what is known of it statically.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace disc::ir {

struct Symbol {
  std::string name;
  int64_t lo = 0;               // smallest admissible value (>= 0)
  int64_t hi = 0;               // largest admissible value (>= lo)
  int64_t multiple_of = 1;      // every admissible value is a multiple of this
  std::optional<int64_t> hint;  // typical value; breaks ties only when an order is undecidable

  bool operator==(const Symbol&) const = default;
};

}  // namespace disc::ir
