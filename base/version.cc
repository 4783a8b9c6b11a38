#include "base/version.h"

namespace disc {

const char* version() {
  return DISC_VERSION;
}

}  // namespace disc
