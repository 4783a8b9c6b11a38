#include "devices/shared_library.h"

#include <dlfcn.h>

namespace disc::devices {

SharedLibrary SharedLibrary::open(std::initializer_list<const char*> names) {
  SharedLibrary lib;
  for (const char* name : names) {
    // RTLD_LOCAL: the vendor's symbols stay out of the global namespace (two CUDA versions' cuBLAS
    // must not resolve against each other). RTLD_NODELETE: the vendors' libraries keep threads
    // and caches to the end of the process, and a leak checker must still find them mapped then.
    if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)) {
      lib.handle_ = std::shared_ptr<void>(h, [](void* p) { dlclose(p); });
      lib.name_ = name;
      lib.error_.clear();
      return lib;
    }
    const char* why = dlerror();
    lib.error_ += (lib.error_.empty() ? "" : "; ") + std::string(why ? why : name);
  }
  return lib;
}

void* SharedLibrary::find(const char* symbol) const {
  return handle_ ? dlsym(handle_.get(), symbol) : nullptr;
}

}  // namespace disc::devices
