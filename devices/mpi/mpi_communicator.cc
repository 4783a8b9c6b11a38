#include "devices/mpi/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "base/error.h"

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
    worker_ = std::thread([this] { work(); });
  }
  ~MpiCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    worker_.join();  // after the collectives started
    if (watchdog_.joinable()) watchdog_.join();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
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
        check(MPI_Allreduce(MPI_IN_PLACE, at, n, type, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
        done += n;
      }
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
    timeout_ms_ = static_cast<int64_t>(seconds * 1e3);
    if (seconds > 0 && !watchdog_.joinable()) watchdog_ = std::thread([this] { watch(); });
  }
  [[noreturn]] void abort(int code) override {
    // Without MPI_THREAD_MULTIPLE MPI_Abort must not race a collective on the worker; the rank
    // then just ends, and mpirun ends the others when one exits without MPI_Finalize.
    if (multiple_) MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; should it, the process still ends
  }

 private:
  static constexpr int64_t kMaxCount = int64_t{1} << 30;

  static int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // Marks the time a collective started waiting, for the watchdog.
  class Waiting {
   public:
    Waiting(MpiCommunicator& c, const char* call) : c_(c) {
      c_.call_ = call;
      c_.since_ms_ = now_ms();
    }
    ~Waiting() { c_.since_ms_ = 0; }

   private:
    MpiCommunicator& c_;
  };

  // Queues `body` for the worker thread, which runs the collectives one at a time in the order
  // posted (every rank posts the same sequence), and times it.
  Collective post(const char* call, std::function<void()> body) {
    std::packaged_task<CollectiveSpan()> job([this, call, body = std::move(body)] {
      CollectiveSpan span{.begin = std::chrono::steady_clock::now()};
      {
        const Waiting waiting(*this, call);
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

  // A thread of its own, since the rank's own thread is inside the collective that hangs: it ends
  // every rank when a collective has waited past the timeout.
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stop_; })) {
      const int64_t since = since_ms_, timeout = timeout_ms_;
      if (since == 0 || timeout <= 0 || now_ms() - since <= timeout) continue;
      std::fprintf(stderr,
                   "disc: rank %d of %d waited %.1f s in %s for the other ranks: one of them hung "
                   "or died; ending every rank (distributed.timeout)\n",
                   rank_, size_, static_cast<double>(now_ms() - since) / 1e3, call_.load());
      std::fflush(stderr);
      // Not MPI_Abort: this thread may not call MPI while the rank's own thread is inside it.
      // mpirun ends the other ranks when one exits without MPI_Finalize.
      std::_Exit(3);
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
  bool multiple_ = false;  // MPI_THREAD_MULTIPLE
  std::string library_;
  std::atomic<int64_t> since_ms_{0};   // when the collective under way began waiting (0: none)
  std::atomic<const char*> call_{""};  // its name
  std::atomic<int64_t> timeout_ms_{0};
  std::mutex mutex_;  // guards jobs_ and stop_
  std::condition_variable wake_;
  std::deque<std::packaged_task<CollectiveSpan()>> jobs_;  // posted, not yet started
  bool stop_ = false;
  std::thread worker_;  // runs jobs_
  std::thread watchdog_;
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
