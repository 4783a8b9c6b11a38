// The GPU device over a vendor's runtime; see gpu_device.h.
#include "devices/gpu/gpu_device.h"

#include <algorithm>
#include <thread>

#include "base/error.h"
#include "devices/gpu/gpu_blas.h"

namespace disc::devices {

GpuDevice::GpuDevice(std::unique_ptr<GpuRuntime> runtime, int host_threads)
    : rt_(std::move(runtime)),
      host_threads_(host_threads > 0
                        ? host_threads
                        : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
      host_blocks_(
          [this](size_t bytes) {
            rt_->make_current();
            return rt_->allocate_host(bytes);
          },
          [this](void* p) {
            rt_->make_current();
            rt_->free_host(p);
          }) {
  rt_->make_current();
  compute_ = rt_->create_stream();
  copies_ = rt_->create_stream();
  computed_ = rt_->create_event();
  copied_ = rt_->create_event();
}

GpuDevice::~GpuDevice() {
  // Nothing may throw here: a device that failed keeps its error for the call that saw it.
  try {
    rt_->make_current();
    rt_->synchronize(compute_);
    rt_->synchronize(copies_);
    blas_.reset();
    for (GpuRuntime::Module m : modules_) rt_->unload_module(m);
    rt_->destroy_event(computed_);
    rt_->destroy_event(copied_);
    rt_->destroy_stream(compute_);
    rt_->destroy_stream(copies_);
  } catch (const Error&) {
  }
}

void* GpuDevice::allocate(size_t bytes) {
  const size_t size = allocation_size(bytes);
  if (size == 0)
    throw OutOfMemory(name() + ": cannot allocate " + std::to_string(bytes) + " bytes");
  rt_->make_current();
  return rt_->allocate(size);  // 256-byte aligned: more than kAllocAlignment
}

void GpuDevice::deallocate(void* p, size_t) {
  rt_->make_current();
  synchronize();  // kernels and copies queued on the block may still run
  rt_->free(p);
}

void* GpuDevice::allocate_host(size_t bytes) {
  return host_blocks_.get(allocation_size(bytes));
}

void GpuDevice::deallocate_host(void* p, size_t bytes) {
  host_blocks_.put(p, allocation_size(bytes));
}

void GpuDevice::copy(void* dst, const void* src, size_t bytes, CopyKind kind) {
  if (bytes == 0) return;
  rt_->make_current();
  if (kind == CopyKind::kDeviceToDevice) return rt_->copy(dst, src, bytes, kind, compute_);
  // The copy waits for the kernels before it, and the kernels after it wait for the copy.
  rt_->record(computed_, compute_);
  rt_->wait(copies_, computed_);
  rt_->copy(dst, src, bytes, kind, copies_);
  rt_->record(copied_, copies_);
  rt_->wait(compute_, copied_);
}

void GpuDevice::synchronize() {
  rt_->make_current();
  rt_->synchronize(copies_);
  rt_->synchronize(compute_);
}

void GpuDevice::gemm(const GemmArgs& g) {
  rt_->make_current();
  std::call_once(blas_once_, [&] { blas_ = std::make_unique<GpuBlas>(rt_->blas(), compute_); });
  blas_->gemm(g, tf32_);
}

void GpuDevice::set_tf32(bool on) {
  if (on && rt_->blas() != BlasLibrary::kCublas)
    throw InvalidArgument(name() + ": TF32 is a mode of NVIDIA's tensor cores, which " + name() +
                          " does not have: train in f32 or bf16 there");
  tf32_ = on;
}

GpuDevice::Kernel GpuDevice::load_kernel(const std::string& image, const std::string& fn) {
  rt_->make_current();
  GpuRuntime::Module m = rt_->load_module(image);
  modules_.push_back(m);
  return rt_->function(m, fn);
}

void GpuDevice::launch(Kernel f, const LaunchShape& shape, void** params) {
  if (shape.grid == 0) return;
  rt_->make_current();
  rt_->launch(f, shape, compute_, params);
}

void GpuDevice::zero(void* p, size_t bytes) {
  if (bytes == 0) return;
  rt_->make_current();
  rt_->zero(p, bytes, compute_);
}

void check_ordinal(const std::string& api, int ordinal, int count) {
  if (ordinal >= 0 && ordinal < count) return;
  throw DeviceError(
      api + ":" + std::to_string(ordinal) + " does not exist: this machine has " +
      std::to_string(count) + " " + api + " device(s)" +
      (count > 0 ? ", " + api + ":0 to " + api + ":" + std::to_string(count - 1) : std::string()));
}

int device_count_or_zero(const std::function<int()>& count, const std::string& none,
                         std::string* why) {
  try {
    const int n = count();
    if (n == 0 && why) *why = none;
    return n;
  } catch (const Error& e) {
    if (why) *why = e.what();
    return 0;
  }
}

}  // namespace disc::devices
