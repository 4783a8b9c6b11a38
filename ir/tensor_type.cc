#include "ir/tensor_type.h"

namespace disc::ir {

std::string TensorType::str() const {
  std::string s(dtype_name(dtype));
  s += '[';
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + shape[i].str();
  return s + ']';
}

}  // namespace disc::ir
