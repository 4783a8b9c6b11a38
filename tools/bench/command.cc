#include "command.h"

#include <sys/wait.h>

#include <cstdio>

#include "base/error.h"

namespace disc::bench {

std::string read_command(const std::string& cmd, int& status) {
  std::fflush(stdout);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw IoError("cannot start " + cmd);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  status = pclose(pipe);
  return out;
}

int exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace disc::bench
