// A GpuRuntime on the host, so that code written for a GPU device (jit/gpu/gpu_ops.h) runs its
// launches, copies and scratch memory through devices::GpuDevice on a machine without a GPU.
// Memory is host memory; streams and events do nothing (everything runs in call order); a module
// image is the path of a shared object built by the test (host_op_compiler.h), whose function NAME
// is looked up as NAME_params, taking the launch's parameter array (the addresses of the kernel's
// arguments), and which launches it through its disc_host_run: the block's threads as fibers of
// the launching thread. To bound the time, at most kHostMaxBlocks blocks of kHostMaxThreads
// threads run (the kernels' loops stride over any grid and block: attention's 131-row cases still
// leave threads idle past the last row).
//
//   devices::GpuDevice dev(std::make_unique<HostGpuRuntime>(), 1);
//   auto f = dev.load_kernel("/tmp/kernels.so", "disc_rope");   // calls disc_rope_params(params)
#pragma once

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "base/error.h"
#include "devices/gpu/gpu_runtime.h"

namespace disc::jit {

inline constexpr unsigned kHostMaxBlocks = 3, kHostMaxThreads = 32;

class HostGpuRuntime final : public devices::GpuRuntime {
 public:
  ~HostGpuRuntime() override {
    for (void* h : handles_) dlclose(h);
  }
  std::string name() const override { return "host-gpu:0"; }
  std::string product() const override { return "the host, as a GPU"; }
  std::string arch() const override { return "host"; }
  int multiprocessors() const override { return 1; }
  devices::BlasLibrary blas() const override { throw DeviceError("host-gpu has no BLAS"); }
  void make_current() const override {}

  devices::MemoryInfo memory_info() const override { return {}; }
  void* allocate(size_t bytes) override {
    return std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  }
  void free(void* p) override { std::free(p); }
  void* allocate_host(size_t bytes) override { return allocate(bytes); }
  void free_host(void* p) override { std::free(p); }
  void copy(void* dst, const void* src, size_t bytes, devices::CopyKind, Stream) override {
    std::memmove(dst, src, bytes);
  }
  void zero(void* p, size_t bytes, Stream) override { std::memset(p, 0, bytes); }

  Stream create_stream() override { return nullptr; }
  void destroy_stream(Stream) override {}
  void synchronize(Stream) override {}
  Event create_event() override { return nullptr; }
  void destroy_event(Event) override {}
  void record(Event, Stream) override {}
  void wait(Stream, Event) override {}

  Module load_module(const std::string& image) override {
    void* h = dlopen(image.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) throw DeviceError(std::string("host-gpu: dlopen: ") + dlerror());
    handles_.push_back(h);
    return h;
  }
  void unload_module(Module) override {}  // closed with the runtime
  Function function(Module m, const std::string& name) override {
    void* entry = dlsym(m, (name + "_params").c_str());
    if (!entry) throw DeviceError("host-gpu: no " + name + "_params in the module");
    void* run = dlsym(m, "disc_host_run");
    if (!run) throw DeviceError("host-gpu: no disc_host_run in the module");
    return &kernels_.emplace_back(
        Kernel{reinterpret_cast<Entry>(entry), reinterpret_cast<Run>(run)});
  }
  void launch(Function f, const devices::LaunchShape& shape, Stream, void** params) override {
    const auto* k = static_cast<const Kernel*>(f);
    k->run(k->entry, params, std::min(shape.grid, kHostMaxBlocks),
           std::min(shape.block, kHostMaxThreads));
  }

 private:
  using Entry = void (*)(void**);
  using Run = void (*)(Entry, void**, unsigned grid, unsigned block);
  struct Kernel {
    Entry entry;
    Run run;
  };
  std::vector<void*> handles_;
  std::deque<Kernel> kernels_;  // Functions point into it
};

}  // namespace disc::jit
