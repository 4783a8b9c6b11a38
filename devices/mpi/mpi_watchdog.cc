#include "devices/mpi/mpi_watchdog.h"

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

namespace disc::devices {
namespace {

constexpr int kQuestion = 1, kAnswer = 2;  // tags on the status communicator
constexpr int64_t kAnswerWithinMs = 2000;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    s += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

MpiWatchdog::MpiWatchdog(const CollectiveProgress& progress, MPI_Comm status, int rank, int size,
                         bool may_call_mpi, double timeout_seconds)
    : progress_(progress),
      status_(status),
      rank_(rank),
      size_(size),
      may_call_mpi_(may_call_mpi),
      timeout_ms_(static_cast<int64_t>(timeout_seconds * 1e3)),
      thread_([this] { watch(); }) {}

MpiWatchdog::~MpiWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void MpiWatchdog::watch() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (wake_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stop_; })) return;
    }
    if (may_call_mpi_) answer_questions();
    const int64_t since = progress_.since_ms, collective = progress_.started;
    if (since == 0 || now_ms() - since <= timeout_ms_) continue;
    const std::string who = may_call_mpi_ ? who_kept_us(collective) : "one of them hung or died";
    std::fprintf(stderr,
                 "disc: rank %d of %d waited %.1f s in %s (collective %lld) for the other ranks: "
                 "%s; ending every rank (distributed.timeout)\n",
                 rank_, size_, static_cast<double>(now_ms() - since) / 1e3, progress_.call.load(),
                 static_cast<long long>(collective), who.c_str());
    std::fflush(stderr);
    // Not MPI_Abort, which would wait for the rank's own thread inside the collective: mpirun
    // ends the other ranks when one exits without MPI_Finalize.
    std::_Exit(3);
  }
}

// Each question gets the collectives this rank has started and whether it is inside one.
void MpiWatchdog::answer_questions() {
  for (;;) {
    int asked = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kQuestion, status_, &asked, &st);
    if (!asked) return;
    int64_t question = 0;
    MPI_Recv(&question, 1, MPI_INT64_T, st.MPI_SOURCE, kQuestion, status_, MPI_STATUS_IGNORE);
    const std::array<int64_t, 2> answer = {progress_.started, progress_.since_ms != 0};
    MPI_Send(answer.data(), 2, MPI_INT64_T, st.MPI_SOURCE, kAnswer, status_);  // small: eager
  }
}

std::string MpiWatchdog::who_kept_us(int64_t waiting_in) {
  std::vector<MPI_Request> asked(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  for (int r = 0; r < size_; ++r)
    if (r != rank_) MPI_Isend(&waiting_in, 1, MPI_INT64_T, r, kQuestion, status_, &asked[r]);
  std::vector<std::optional<std::array<int64_t, 2>>> answers(static_cast<size_t>(size_));
  int answered = 0;
  for (const int64_t until = now_ms() + kAnswerWithinMs;
       answered < size_ - 1 && now_ms() < until;) {
    answer_questions();  // the others' watchdogs may be asking too
    int came = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kAnswer, status_, &came, &st);
    if (!came) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    std::array<int64_t, 2> a{};
    MPI_Recv(a.data(), 2, MPI_INT64_T, st.MPI_SOURCE, kAnswer, status_, MPI_STATUS_IGNORE);
    if (!answers[st.MPI_SOURCE]) ++answered;
    answers[st.MPI_SOURCE] = a;
  }
  std::vector<int> silent, behind;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    if (!answers[r]) {
      silent.push_back(r);
    } else if ((*answers[r])[0] < waiting_in) {
      behind.push_back(r);
    }
  }
  std::string who;
  if (!silent.empty()) {
    who = rank_list(silent) + " did not answer within " + std::to_string(kAnswerWithinMs / 1000) +
          " s (stopped, hung inside MPI, or gone)";
  }
  if (!behind.empty()) {
    who += (who.empty() ? "" : "; ") + rank_list(behind) +
           " answered but never reached this collective (busy or hung outside MPI)";
  }
  return who.empty() ? "every rank answered from inside it" : who;
}

}  // namespace disc::devices
