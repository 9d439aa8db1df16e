#include <npc/util/build_note.hpp>

#include <npc/util/elf_note.hpp>

namespace npc::util {

std::optional<std::string> build_of_ours(const fs::path& path) {
  auto version = find_elf_note(path, kBuildNoteOwner, kBuildNoteType);
  // Stored with its NUL, as C strings are in notes.
  while (version && !version->empty() && version->back() == '\0') version->pop_back();
  return version;
}

} // namespace npc::util
