#pragma once
// The notes of an ELF file (the PT_NOTE segments its program headers name,
// where .note.gnu.build-id and the like live), read from the file without
// running it: a few hundred bytes near its start, whatever its size.
//
// Only an ELF file of this machine's class and byte order is read: a file
// of another kind (a script, a binary for another machine) has no notes to
// us. Every size in the file is bounded before anything is read, so a
// hostile or truncated file is "no such note", never a large read.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace npc::util {

namespace fs = std::filesystem;

// The descriptor of the first note of `owner` (its name, without the NUL)
// and `type` in the regular file at `path`; nullopt when the file cannot be
// read, is not such an ELF file, or has no such note. Never blocks on a FIFO
// or a device: only a regular file is read.
[[nodiscard]] std::optional<std::string> find_elf_note(const fs::path& path, std::string_view owner,
                                                       std::uint32_t type);

} // namespace npc::util
