// SIGINT, SIGTERM and SIGHUP during a run: the first asks the run to stop after the current step
// (it then writes a checkpoint, the trace and the memory report, and exits 128 + the signal); a
// second one of any of them ends the process at once, as the signal would by default.
#pragma once

namespace disc::apps {

class StopSignals {
 public:
  StopSignals();   // installs the handlers; one instance at a time
  ~StopSignals();  // restores the handlers that were there before
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The first signal received, or 0.
  int received() const;
  // "SIGINT" etc.
  static const char* name(int signal);
};

}  // namespace disc::apps
