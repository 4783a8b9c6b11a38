// Runs a shell command and reads what it prints: the benchmarks' way to their Python baselines.
//
//   int status = 0;
//   const std::string out = read_command("python3 torch_sdpa.py ...", status);
//   if (status != 0) throw Error("... failed (exit " + std::to_string(exit_code(status)) + ")");
#pragma once

#include <string>

namespace disc::bench {

// The command's stdout (stdout is flushed first, so that our own lines come before its output);
// its wait status goes to `status`. Throws IoError when it cannot start.
std::string read_command(const std::string& cmd, int& status);

// The exit code a wait status holds; -1 when the command did not exit (a signal).
int exit_code(int status);

}  // namespace disc::bench
