#include "devices/mpi/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "base/error.h"

namespace disc::devices {
namespace {

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int provided = 0;
    // Serialized: the executor calls from one thread at a time, not always the same one.
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    // Errors come back as codes (and become exceptions) instead of aborting every rank.
    check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    library_.assign(version, static_cast<size_t>(length));
    if (size_t comma = library_.find(','); comma != std::string::npos) library_.resize(comma);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override {
    return "mpi (" + library_ + "), rank " + std::to_string(rank_) + " of " +
           std::to_string(size_);
  }

  void all_reduce_sum(void* data, int64_t count, DType dtype) override {
    for (int64_t done = 0; done < count;) {  // MPI counts are ints
      const int n = static_cast<int>(std::min<int64_t>(count - done, kMaxCount));
      char* at = static_cast<char*>(data) + done * dtype_size(dtype);
      check(MPI_Allreduce(MPI_IN_PLACE, at, n, mpi_type(dtype), MPI_SUM, MPI_COMM_WORLD),
            "MPI_Allreduce");
      done += n;
    }
  }
  void broadcast(void* data, int64_t bytes, int root) override {
    for (int64_t done = 0; done < bytes;) {
      const int n = static_cast<int>(std::min<int64_t>(bytes - done, kMaxCount));
      check(MPI_Bcast(static_cast<char*>(data) + done, n, MPI_BYTE, root, MPI_COMM_WORLD),
            "MPI_Bcast");
      done += n;
    }
  }
  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; should it, the process still ends
  }

 private:
  static constexpr int64_t kMaxCount = int64_t{1} << 30;

  static MPI_Datatype mpi_type(DType t) {
    switch (t) {
      case DType::kF32:
        return MPI_FLOAT;
      case DType::kF64:
        return MPI_DOUBLE;
      case DType::kI64:
        return MPI_INT64_T;
      default:
        throw InvalidArgument("all_reduce_sum sums f32, f64 or i64, not " +
                              std::string(dtype_name(t)));
    }
  }
  void check(int code, const char* call) const {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw DeviceError(std::string(call) + " failed on rank " + std::to_string(rank_) + ": " +
                      std::string(text, static_cast<size_t>(length)));
  }

  int rank_ = -1, size_ = 0;
  std::string library_;
};

}  // namespace

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
}

namespace {
// Made once and kept to the end of the process: MPI cannot be initialised a second time.
std::shared_ptr<Communicator>& the_world() {
  static std::shared_ptr<Communicator> world;
  return world;
}
std::once_flag world_made;
}  // namespace

std::shared_ptr<Communicator> mpi_world() {
  if (!launched_by_mpirun()) return nullptr;
  std::call_once(world_made, [] { the_world() = std::make_shared<MpiCommunicator>(); });
  return the_world();
}

std::shared_ptr<Communicator> mpi_world_if_started() {
  return the_world();
}

}  // namespace disc::devices
