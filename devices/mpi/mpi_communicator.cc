#include "devices/mpi/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "base/error.h"
#include "devices/mpi/mpi_watchdog.h"

namespace disc::devices {
namespace {

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int provided = 0;
    // The collectives run on the communicator's thread, and abort() may come from another while
    // one is under way: that takes MPI_THREAD_MULTIPLE (Open MPI has it); serialized calls do
    // for the rest.
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    if (provided < MPI_THREAD_SERIALIZED) {
      throw DeviceError(
          "this MPI library cannot be called from a second thread (MPI_Init_thread gave level " +
          std::to_string(provided) + "); disc needs MPI_THREAD_SERIALIZED at least");
    }
    multiple_ = provided == MPI_THREAD_MULTIPLE;
    // Errors come back as codes (and become exceptions) instead of aborting every rank.
    check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    library_.assign(version, static_cast<size_t>(length));
    if (size_t comma = library_.find(','); comma != std::string::npos) library_.resize(comma);
    check(MPI_Comm_dup(MPI_COMM_WORLD, &status_), "MPI_Comm_dup");  // the watchdogs' own
    worker_ = std::thread([this] { work(); });
  }
  ~MpiCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    worker_.join();  // after the collectives started
    watchdog_.reset();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      MPI_Comm_free(&status_);
      MPI_Finalize();
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override {
    return "mpi (" + library_ + "), rank " + std::to_string(rank_) + " of " + std::to_string(size_);
  }

  Collective start_all_reduce_sum(void* data, int64_t count, DType dtype) override {
    const MPI_Datatype type = mpi_type(dtype);  // a bad dtype throws here, on the caller's thread
    return post("MPI_Allreduce", [this, data, count, dtype, type] {
      for (int64_t done = 0; done < count;) {  // MPI counts are ints
        const int n = static_cast<int>(std::min<int64_t>(count - done, kMaxCount));
        char* at = static_cast<char*>(data) + done * dtype_size(dtype);
        MPI_Request r;
        check(MPI_Iallreduce(MPI_IN_PLACE, at, n, type, MPI_SUM, MPI_COMM_WORLD, &r),
              "MPI_Iallreduce");
        finish(r, "MPI_Iallreduce");
        done += n;
      }
    });
  }
  Collective start_reduce_scatter_sum(const void* data, int64_t count, DType dtype,
                                      void* part) override {
    const MPI_Datatype type = mpi_type(dtype);
    const int64_t s = (count + size_ - 1) / size_, esize = dtype_size(dtype);
    if (s > kMaxCount)
      throw InvalidArgument("reduce_scatter of " + std::to_string(s) + " values a rank is over " +
                            "MPI's count limit: run on more ranks");
    // The ranks' parts side by side, zeros past `count`; copied now, so that `data` may go.
    auto padded = std::make_shared<std::vector<char>>(static_cast<size_t>(s * size_ * esize));
    std::memcpy(padded->data(), data, static_cast<size_t>(count * esize));
    return post("MPI_Reduce_scatter_block", [this, padded, s, type, part] {
      MPI_Request r;
      check(MPI_Ireduce_scatter_block(padded->data(), part, static_cast<int>(s), type, MPI_SUM,
                                      MPI_COMM_WORLD, &r),
            "MPI_Ireduce_scatter_block");
      finish(r, "MPI_Ireduce_scatter_block");
    });
  }
  Collective start_all_gather(const void* part, int64_t count, DType dtype, void* all,
                              int64_t all_count) override {
    const MPI_Datatype type = mpi_type(dtype);
    if (count > kMaxCount)
      throw InvalidArgument("all_gather of " + std::to_string(count) + " values a rank is over " +
                            "MPI's count limit: run on more ranks");
    const int64_t esize = dtype_size(dtype);
    // The ranks' parts land side by side here; this rank's goes in now, so `part` may go.
    auto joined = std::make_shared<std::vector<char>>(static_cast<size_t>(count * size_ * esize));
    std::memcpy(joined->data() + rank_ * count * esize, part, static_cast<size_t>(count * esize));
    return post("MPI_Allgather", [this, joined, count, type, esize, all, all_count] {
      MPI_Request r;
      check(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, joined->data(),
                           static_cast<int>(count), type, MPI_COMM_WORLD, &r),
            "MPI_Iallgather");
      finish(r, "MPI_Iallgather");
      std::memcpy(all, joined->data(), static_cast<size_t>(all_count * esize));
    });
  }
  void broadcast(void* data, int64_t bytes, int root) override {
    post("MPI_Bcast", [this, data, bytes, root] {
      for (int64_t done = 0; done < bytes;) {
        const int n = static_cast<int>(std::min<int64_t>(bytes - done, kMaxCount));
        check(MPI_Bcast(static_cast<char*>(data) + done, n, MPI_BYTE, root, MPI_COMM_WORLD),
              "MPI_Bcast");
        done += n;
      }
    }).get();
  }
  void set_timeout(double seconds) override {
    watchdog_.reset();
    if (seconds > 0) {
      watchdog_ =
          std::make_unique<MpiWatchdog>(progress_, status_, rank_, size_, multiple_, seconds);
    }
  }
  [[noreturn]] void abort(int code) override {
    // Without MPI_THREAD_MULTIPLE MPI_Abort must not race a collective on the worker; the rank
    // then just ends, and mpirun ends the others when one exits without MPI_Finalize.
    if (multiple_) MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; should it, the process still ends
  }

 private:
  static constexpr int64_t kMaxCount = int64_t{1} << 30;

  // Marks the collective under way, for the watchdog.
  class Waiting {
   public:
    Waiting(CollectiveProgress& p, const char* call) : p_(p) {
      p_.call = call;
      ++p_.started;
      p_.since_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count();
    }
    ~Waiting() { p_.since_ms = 0; }

   private:
    CollectiveProgress& p_;
  };

  // Queues `body` for the worker thread, which runs the collectives one at a time in the order
  // posted (every rank posts the same sequence), and times it.
  Collective post(const char* call, std::function<void()> body) {
    std::packaged_task<CollectiveSpan()> job([this, call, body = std::move(body)] {
      CollectiveSpan span{.begin = std::chrono::steady_clock::now()};
      {
        const Waiting waiting(progress_, call);
        body();
      }
      span.end = std::chrono::steady_clock::now();
      return span;
    });
    Collective done = job.get_future().share();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    wake_.notify_all();
    return done;
  }
  void work() {
    for (;;) {
      std::packaged_task<CollectiveSpan()> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping, and every collective posted has run
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();  // an MPI error is kept in the job's future
    }
  }

  static MPI_Datatype mpi_type(DType t) {
    switch (t) {
      case DType::kF32:
        return MPI_FLOAT;
      case DType::kF64:
        return MPI_DOUBLE;
      case DType::kI64:
        return MPI_INT64_T;
      default:
        throw InvalidArgument("the collectives take f32, f64 or i64, not " +
                              std::string(dtype_name(t)));
    }
  }
  // Progresses a non-blocking collective until it completes, sleeping between tests: a blocking
  // collective would spin, taking a core from the step's compute while it waits for the others.
  void finish(MPI_Request& r, const char* call) const {
    for (;;) {
      int done = 0;
      check(MPI_Test(&r, &done, MPI_STATUS_IGNORE), call);
      if (done) return;
      std::this_thread::yield();
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
  bool multiple_ = false;  // MPI_THREAD_MULTIPLE
  std::string library_;
  MPI_Comm status_ = MPI_COMM_NULL;  // the watchdogs'
  CollectiveProgress progress_;
  std::mutex mutex_;  // guards jobs_ and stop_
  std::condition_variable wake_;
  std::deque<std::packaged_task<CollectiveSpan()>> jobs_;  // posted, not yet started
  bool stop_ = false;
  std::thread worker_;  // runs jobs_
  std::unique_ptr<MpiWatchdog> watchdog_;
};

// Whether mpirun started this process (Open MPI's launcher sets OMPI_COMM_WORLD_SIZE).
bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
}

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
