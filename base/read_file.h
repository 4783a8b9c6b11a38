// Reads a whole input file the user named (a config.json, an ONNX model), refusing what is not a
// regular file before opening it: opening a FIFO waits for a writer forever, and /dev/zero (a
// config.json linked to it) never ends.
#pragma once

#include <string>

namespace disc {

// The bytes of the regular file at `path` (symlinks followed). IoError naming the path when it is
// missing, cannot be read, or is not a regular file; `what` says what the file was to be ("the
// ONNX model").
std::string read_regular_file(const std::string& path, const std::string& what);

}  // namespace disc
