#pragma once
// Files the user names as inputs (--graph, import FILE, --from-report):
// only regular files, symlinks followed. A device never ends (/dev/zero
// would be read forever), a FIFO without a writer blocks open() forever:
// both are refused with a line that says what the path is.

#include <filesystem>
#include <string>
#include <string_view>

#include <npc/util/fs.hpp>
#include <npc/util/result.hpp>

namespace npc::util {

// "directory", "character device", "FIFO", ... for a stat mode.
[[nodiscard]] std::string_view file_type_name(unsigned mode);

// Opens `path` for reading when it is a regular file: looked at with stat()
// before open(), so that a FIFO is never opened, and again with fstat()
// after, so that one swapped in between is refused too.
[[nodiscard]] Result<UniqueFd> open_input_file(const fs::path& path);

// The whole content of a regular file named by the user.
[[nodiscard]] Result<std::string> read_input_file(const fs::path& path);

} // namespace npc::util
