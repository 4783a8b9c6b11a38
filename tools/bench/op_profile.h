// Where a training step's time goes: wall time per op, summed over the steps an observer saw.
// A `fused` node counts under "fused [its iteration space]", a matmul under its operands;
// evictions and regenerations under their own names.
//
//   bench::OpProfile profile;
//   trainer.set_observer(profile.observer());
//   ... steps ...
//   trainer.set_observer({});
//   profile.print("disc fused", 8);  // the 8 ops that took longest, with their share
#pragma once

#include <map>
#include <string>

#include "engine/executor.h"

namespace disc::bench {

class OpProfile {
 public:
  // The observer adds to this profile, which must outlive its use.
  engine::StepObserver observer();
  // Prints the `top` ops by total time, their run counts and share of the observed time.
  void print(const std::string& title, int top) const;

 private:
  struct Entry {
    double us = 0;
    long long runs = 0;
  };
  std::map<std::string, Entry> ops_;
};

}  // namespace disc::bench
