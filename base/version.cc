#include "base/version.h"

namespace disc {

const char* version() {
  return DISC_VERSION;
}
const char* commit() {
  return DISC_COMMIT;
}

}  // namespace disc
