// The disc-train subcommands' work, each returning the process exit code.
#pragma once

#include "config.h"

namespace disc::apps {

struct RunFlags {
  bool resume = false;  // continue from the newest complete checkpoint in checkpoint.dir
};

int run_training(const Config& c, const RunFlags& f);
int validate(const Config& c);
int plan(const Config& c);

}  // namespace disc::apps
