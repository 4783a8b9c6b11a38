// Runs a function on a thread with a stack of a given size: a test that a walk over a graph or a
// kernel as deep as a hostile file makes it needs no frame per node (the main thread's 8 MiB hides
// a recursion thousands of nodes deep).
#pragma once

#include <gtest/gtest.h>
#include <pthread.h>

#include <exception>
#include <functional>

namespace disc::testing {

// Runs f on a thread of `stack` bytes; rethrows what it threw.
inline void on_stack(size_t stack, const std::function<void()>& f) {
  struct Job {
    const std::function<void()>* f;
    std::exception_ptr error;
  } job{&f, nullptr};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stack);
  pthread_t t;
  auto run = [](void* p) -> void* {
    auto* j = static_cast<Job*>(p);
    try {
      (*j->f)();
    } catch (...) {
      j->error = std::current_exception();
    }
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&t, &attr, run, &job), 0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace disc::testing
