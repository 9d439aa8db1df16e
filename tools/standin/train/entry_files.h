// File operations on cache entries. Everything another process may read at
// any moment is written to a temporary name in the same directory and then
// renamed into place, so a reader never sees half a file.
#pragma once

#include <string>
#include <string_view>

namespace standin::train {

bool path_exists(const std::string& path);

// "<dir>/.<name>.<pid>.tmp": unique per process, hidden, same file system.
std::string temporary_path_for(const std::string& path);

enum class IfPresent { kKeep, kReplace };

// Writes `contents` to `path` through a temporary file and rename; with
// kKeep an existing file is left as it is. Throws failure() naming `what`.
void publish_file(const std::string& path, std::string_view contents, IfPresent if_present,
                  const std::string& what);

// rename(2), throwing failure() naming `what`.
void rename_file(const std::string& from, const std::string& to, const std::string& what);

// Replaces `to` with a copy of `from`; throws failure().
void copy_file_over(const std::string& from, const std::string& to);

// mkdir -p; throws failure().
void create_directories(const std::string& path);

}  // namespace standin::train
