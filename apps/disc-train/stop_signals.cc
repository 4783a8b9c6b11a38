#include "stop_signals.h"

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace disc::apps {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
std::atomic<int> first_signal{0};
struct sigaction previous[3];

void on_signal(int sig) {
  int expected = 0;
  if (first_signal.compare_exchange_strong(expected, sig)) return;
  // A second signal: the user wants out now. Default disposition, then the signal again.
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

StopSignals::StopSignals() {
  first_signal = 0;
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  ::sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a write or read in progress goes on; the run checks between steps
  for (int i = 0; i < 3; ++i) {
    if (::sigaction(kSignals[i], &sa, &previous[i]) != 0)
      throw Error(std::string("cannot install a signal handler: ") + std::strerror(errno));
  }
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &previous[i], nullptr);
}

int StopSignals::received() const {
  return first_signal.load();
}

const char* StopSignals::name(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "a signal";
  }
}

}  // namespace disc::apps
