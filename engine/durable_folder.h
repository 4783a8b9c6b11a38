// Folders that appear whole or not at all: a checkpoint, an exported model. Each is written into a
// hidden sibling (`.NAME.partial`), synced, and renamed into place, so nothing that lists or
// loads it ever sees it half written, even after a crash.
#pragma once

#include <filesystem>
#include <string>

namespace disc::engine {

// Writes `text` to a new file and syncs it (the folder it is in gets renamed into place later).
void write_text_durably(const std::string& path, const std::string& text);

// Syncs a folder, so that the entries created or renamed in it survive a crash.
void sync_folder(const std::string& path);

// The hidden sibling a folder is written into before it is renamed to `final`.
std::filesystem::path staging_folder(const std::filesystem::path& final);

// Removes a file or folder, ignoring errors (cleaning up after a failure that is reported).
void remove_quietly(const std::filesystem::path& p);

}  // namespace disc::engine
