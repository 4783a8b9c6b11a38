// The exceptions disc throws. Every message is one line that says what was wrong, where, and how
// to fix it. No library code aborts the host process: callers catch disc::Error.
#pragma once

#include <stdexcept>
#include <string>

namespace disc {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A caller passed something that can never work (bad option, unknown name).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// Text that does not parse; the message starts with file:line:col.
class ParseError : public Error {
 public:
  using Error::Error;
};

// A graph that is inconsistent: the message names the node and what disagrees.
class VerifyError : public Error {
 public:
  using Error::Error;
};

// Symbolic shapes that contradict each other, or a concrete shape that violates them.
class ShapeError : public Error {
 public:
  using Error::Error;
};

// An allocation that would exceed a memory cap or the device's memory.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

// Generating or compiling a kernel failed (the JIT and GPU backends throw it).
class CompileError : public Error {
 public:
  using Error::Error;
};

// A device that is not there or failed: no GPU or no driver, or a driver call that returned an
// error (the message names the call and the driver's error).
class DeviceError : public Error {
 public:
  using Error::Error;
};

// A file that cannot be read or written.
class IoError : public Error {
 public:
  using Error::Error;
};

// Rethrows `e` with `prefix` in front of its message, keeping its type (callers add context such
// as which node failed).
[[noreturn]] inline void rethrow_with_context(const Error& e, const std::string& prefix) {
  std::string m = prefix + e.what();
  if (dynamic_cast<const OutOfMemory*>(&e)) throw OutOfMemory(m);
  if (dynamic_cast<const ShapeError*>(&e)) throw ShapeError(m);
  if (dynamic_cast<const VerifyError*>(&e)) throw VerifyError(m);
  if (dynamic_cast<const ParseError*>(&e)) throw ParseError(m);
  if (dynamic_cast<const IoError*>(&e)) throw IoError(m);
  if (dynamic_cast<const DeviceError*>(&e)) throw DeviceError(m);
  if (dynamic_cast<const CompileError*>(&e)) throw CompileError(m);
  if (dynamic_cast<const InvalidArgument*>(&e)) throw InvalidArgument(m);
  throw Error(m);
}

}  // namespace disc
