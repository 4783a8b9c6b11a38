// Folders that appear whole or not at all: a checkpoint, an exported model. Each is written into a
// hidden sibling (`.NAME.partial`), synced, and renamed into place, so nothing that lists or
// loads it ever sees it half written, even after a crash.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace disc::engine {

// Writes `text` to a new file and syncs it (the folder it is in gets renamed into place later).
void write_text_durably(const std::string& path, const std::string& text);

// Writes the folder `final` whole: `fill` writes its files into a fresh hidden sibling
// (`.NAME.partial`), which is synced and renamed into place, replacing `final` (the caller has
// checked that it may go). On any failure the sibling is removed and `final` stays as it was; a
// filesystem error is an IoError naming `what` ("put checkpoint ck/step-1 in place").
void write_folder(const std::filesystem::path& final, const std::string& what,
                  const std::function<void(const std::filesystem::path& staging)>& fill);

}  // namespace disc::engine
