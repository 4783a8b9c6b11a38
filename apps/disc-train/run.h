// The disc-train subcommands' work, each returning the process exit code.
#pragma once

#include "config.h"

namespace disc::apps {

struct RunFlags {
  bool resume = false;         // continue from the newest complete checkpoint in checkpoint.dir
  bool allow_changes = false;  // resume although config keys that change the numbers differ
};

// The exit code of a run that diverged: neither 1, which mpirun gives for a job it stopped on a
// signal whatever its ranks return (Open MPI 4.1), nor 2 (bad input) or 3 (a hung rank).
inline constexpr int kExitDiverged = 4;

// 0 when the run finished; kExitDiverged when it diverged (a loss or gradient norm not finite:
// nothing is saved from that state); 128 + the signal when SIGINT, SIGTERM or SIGHUP stopped it
// after a step (checkpoint, trace and report written first).
int run_training(const Config& c, const RunFlags& f);
int validate(const Config& c);
// Prints the symbols, the governor's schedule, candidates and memory plan at `shape` ("B=8,S=64";
// "": every symbol at its upper bound), the fusion plan and the step's graph; before them, what
// the compile pipeline's stages named in `dump_after` ("fusion,schedule", "all") made.
// A summary comes first: the peak without and with the plan's evictions, the cap, the lower bound
// a cap could reach and the smallest cap the planner reaches; `json`: that summary alone, as JSON.
int plan(const Config& c, const std::string& shape, const std::string& dump_after = "",
         bool json = false);

}  // namespace disc::apps
