// A vendor library loaded at run time (dlopen), so that one binary runs with or without it: the
// GPU backends find the CUDA driver, NVRTC and cuBLAS this way, and a build links none of them.
//
//   devices::SharedLibrary lib = devices::SharedLibrary::open({"libnvrtc.so.13", "libnvrtc.so"});
//   if (!lib) return lib.error();           // each name tried, and why it failed
//   auto fn = lib.symbol<int (*)(int*, int*)>("nvrtcVersion");
#pragma once

#include <initializer_list>
#include <memory>
#include <string>

namespace disc::devices {

class SharedLibrary {
 public:
  // The first of `names` that loads (dlopen's search: LD_LIBRARY_PATH, the ld cache, ...). Never
  // throws: an empty library says why in error().
  static SharedLibrary open(std::initializer_list<const char*> names);

  explicit operator bool() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }  // why nothing loaded
  const std::string& name() const { return name_; }    // the name that loaded

  // The function `symbol` names, or nullptr when the library has none.
  template <typename Fn>
  Fn symbol(const char* symbol) const {
    return reinterpret_cast<Fn>(find(symbol));
  }

 private:
  void* find(const char* symbol) const;

  std::shared_ptr<void> handle_;  // dlclose when the last copy goes
  std::string name_, error_;
};

}  // namespace disc::devices
