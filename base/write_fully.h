// write(2) until every byte is written: a signal or a full pipe may cut a write short, and each
// caller that looped on its own got the retry subtly different. The one POSIX call in base/.
#pragma once

#include <cstddef>
#include <cstdint>

namespace disc {

// Writes the `n` bytes at `p` to `fd`, at `offset` with pwrite(2) when it is 0 or more (the file
// position unchanged), else at the file position. Returns 0, or the errno of the write that
// failed; `*done`, when given, counts the bytes written before it.
int write_fully(int fd, const void* p, size_t n, int64_t offset = -1, size_t* done = nullptr);

}  // namespace disc
