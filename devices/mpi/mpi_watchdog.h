// The watchdog of a rank's collectives (devices/mpi/mpi_communicator.cc): a thread that ends the
// rank when a collective has waited past the timeout for the other ranks, naming the ranks that
// kept it waiting. To name them it asks every other rank's watchdog how far that rank has got,
// over a communicator of its own, and answers their questions the same way; a rank that does not
// answer is stopped, hung inside MPI or gone, and one that answers from before the collective is
// alive but busy or hung outside MPI.
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace disc::devices {

// How far a rank's collectives have got: written by the communicator's worker thread.
struct CollectiveProgress {
  std::atomic<int64_t> started{0};   // collectives begun so far, the one under way included
  std::atomic<int64_t> since_ms{0};  // when the one under way began (steady clock; 0: none)
  std::atomic<const char*> call{""};
};

class MpiWatchdog {
 public:
  // `status`: a duplicate of the world that only the watchdogs use. Without MPI_THREAD_MULTIPLE
  // (`may_call_mpi` false) it cannot call MPI beside the worker, so it neither asks nor answers,
  // and names no rank.
  MpiWatchdog(const CollectiveProgress& progress, MPI_Comm status, int rank, int size,
              bool may_call_mpi, double timeout_seconds);
  ~MpiWatchdog();
  MpiWatchdog(const MpiWatchdog&) = delete;
  MpiWatchdog& operator=(const MpiWatchdog&) = delete;

 private:
  void watch();
  void answer_questions();
  // The ranks that have not reached collective number `waiting_in`, as the end of a sentence.
  std::string who_kept_us(int64_t waiting_in);

  const CollectiveProgress& progress_;
  MPI_Comm status_;
  int rank_, size_;
  bool may_call_mpi_;
  int64_t timeout_ms_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace disc::devices
