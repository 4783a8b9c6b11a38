// The part of a GpuRuntime (gpu_runtime.h) that reads the same over the CUDA Driver API and the
// HIP runtime, written once over a vendor's function table: the device's description, memory
// info, device memory, streams, events, modules and launches. cuda/cuda_device.cc and
// hip/hip_device.cc derive from it and keep what only their vendor does (the device's context or
// its selection, copies, page-locked memory, the architecture), plus a description of the vendor:
// its types, and the function of its table each shared call makes. Errors name that function as
// the vendor spells it ("cuda: cuStreamCreate failed: ...").
//
//   struct Cuda {                       // what VendorRuntime reads of the CUDA Driver API
//     using Api = DriverApi;  ...       // the table, result code, handles (see below)
//     static constexpr auto stream_create = DISC_VENDOR_CALL(cuStreamCreate);
//   };
//   class DriverRuntime final : public VendorRuntime<Cuda> { ... };
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "devices/gpu/gpu_runtime.h"

namespace disc::devices {

// One function of a vendor's table `Api`: the member that holds it, and the name errors give it.
template <typename Api, typename Fn>
struct VendorCall {
  Fn Api::* member;
  const char* name;
};

// vendor_call(&DriverApi::cuMemAlloc, "cuMemAlloc"), as DISC_VENDOR_CALL writes it.
template <typename Api, typename Fn>
constexpr VendorCall<Api, Fn> vendor_call(Fn Api::* member, const char* name) {
  return {member, name};
}

// The VendorCall of `member` in the table `Api` of the vendor description being written, named as
// the member is (cuMemAlloc, not its exported cuMemAlloc_v2).
#define DISC_VENDOR_CALL(member) ::disc::devices::vendor_call(&Api::member, #member)

// `Vendor` describes the vendor:
//   Api, Result                      its function table and the result code its functions return
//   DevicePtr                        a device address as its functions take one
//   Stream, Event, Module, Function  its handles
//   kName, kBlas                     "cuda" (device names cuda:N), its BLAS library
//   kStreamNonBlocking, kEventDisableTiming   the flags create_stream and create_event pass
//   api(), check(api, e, what)       the loaded table (throws why there is none); throws for e
//   device_count, mem_get_info, mem_alloc, mem_free, mem_free_host, mem_set (bytes to 0),
//   stream_create, stream_destroy, stream_synchronize, stream_wait_event, event_create,
//   event_destroy, event_record, module_load, module_unload, module_function, launch_kernel
//                                    VendorCalls of the functions that make those calls
template <typename Vendor>
class VendorRuntime : public GpuRuntime {
 public:
  // The devices the vendor's library sees; throws when it is not there.
  static int count_devices() {
    const typename Vendor::Api& api = Vendor::api();
    int n = 0;
    Vendor::check(api, (api.*Vendor::device_count.member)(&n), Vendor::device_count.name);
    return n;
  }

  std::string name() const override {
    return std::string(Vendor::kName) + ":" + std::to_string(ordinal_);
  }
  std::string product() const override { return product_; }
  std::string arch() const override { return arch_; }
  int multiprocessors() const override { return multiprocessors_; }
  BlasLibrary blas() const override { return Vendor::kBlas; }

  MemoryInfo memory_info() const override {
    make_current();
    size_t free = 0, total = 0;
    call(Vendor::mem_get_info, &free, &total);
    return {static_cast<int64_t>(total), static_cast<int64_t>(free)};
  }
  void* allocate(size_t bytes) override {
    DevicePtr p{};
    check(invoke(Vendor::mem_alloc, &p, bytes),
          name() + " " + Vendor::mem_alloc.name + "(" + std::to_string(bytes) + " bytes)");
    return reinterpret_cast<void*>(p);
  }
  void free(void* p) override { call(Vendor::mem_free, device_ptr(p)); }
  void free_host(void* p) override { call(Vendor::mem_free_host, p); }
  void zero(void* p, size_t bytes, Stream s) override {
    call(Vendor::mem_set, device_ptr(p), 0, bytes, stream(s));
  }

  Stream create_stream() override {
    typename Vendor::Stream s = nullptr;
    call(Vendor::stream_create, &s, Vendor::kStreamNonBlocking);
    return s;
  }
  void destroy_stream(Stream s) override { call(Vendor::stream_destroy, stream(s)); }
  void synchronize(Stream s) override { call(Vendor::stream_synchronize, stream(s)); }
  Event create_event() override {
    typename Vendor::Event e = nullptr;
    call(Vendor::event_create, &e, Vendor::kEventDisableTiming);
    return e;
  }
  void destroy_event(Event e) override { call(Vendor::event_destroy, event(e)); }
  void record(Event e, Stream s) override { call(Vendor::event_record, event(e), stream(s)); }
  void wait(Stream s, Event e) override {
    call(Vendor::stream_wait_event, stream(s), event(e), 0u);
  }

  Module load_module(const std::string& image) override {
    typename Vendor::Module m = nullptr;
    call(Vendor::module_load, &m, image.c_str());
    return m;
  }
  void unload_module(Module m) override { call(Vendor::module_unload, module(m)); }
  Function function(Module m, const std::string& fn) override {
    typename Vendor::Function f = nullptr;
    check(invoke(Vendor::module_function, &f, module(m), fn.c_str()),
          std::string(Vendor::module_function.name) + "(" + fn + ")");
    return f;
  }
  void launch(Function f, const LaunchShape& sh, Stream s, void** params) override {
    check(invoke(Vendor::launch_kernel, static_cast<typename Vendor::Function>(f), sh.grid, 1u, 1u,
                 sh.block, 1u, 1u, sh.shared_bytes, stream(s), params, nullptr),
          std::string(Vendor::launch_kernel.name) + "(grid " + std::to_string(sh.grid) +
              ", block " + std::to_string(sh.block) + ")");
  }

 protected:
  using DevicePtr = typename Vendor::DevicePtr;

  // Loads the vendor's table (throws DeviceError saying why there is none); the derived
  // constructor finds the device and fills in product_, arch_ and multiprocessors_.
  explicit VendorRuntime(int ordinal) : api_(Vendor::api()), ordinal_(ordinal) {}

  // Throws for e != success, with `what` (the call and its arguments) and the vendor's error.
  void check(typename Vendor::Result e, const std::string& what) const {
    Vendor::check(api_, e, what);
  }
  // The function `c` of the table, called with `args`: its result code ...
  template <typename Call, typename... Args>
  typename Vendor::Result invoke(const Call& c, Args... args) const {
    return (api_.*c.member)(args...);
  }
  // ... and checked, naming the function when it fails.
  template <typename Call, typename... Args>
  void call(const Call& c, Args... args) const {
    check(invoke(c, args...), c.name);
  }

  static typename Vendor::Stream stream(Stream s) {
    return static_cast<typename Vendor::Stream>(s);
  }
  static typename Vendor::Event event(Event e) { return static_cast<typename Vendor::Event>(e); }
  static typename Vendor::Module module(Module m) {
    return static_cast<typename Vendor::Module>(m);
  }
  // A device address as the vendor's functions take it, from GpuRuntime's void*: CUDA's are
  // integers, HIP's pointers.
  static DevicePtr device_ptr(const void* p) {
    return reinterpret_cast<DevicePtr>(const_cast<void*>(p));
  }

  const typename Vendor::Api& api_;
  int ordinal_;
  std::string product_, arch_;
  int multiprocessors_ = 0;
};

}  // namespace disc::devices
