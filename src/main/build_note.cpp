// The note that says a program is ours (util/build_note.hpp), linked into
// every program as a source of its own, never from a library: a static
// library's object is linked only when something refers to it, and nothing
// refers to a note.
//
// A section named .note.* is given the type SHT_NOTE by the assembler, and
// the linker puts an allocated note section into the program's PT_NOTE
// segment, where util/elf_note.hpp reads it.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <npc/util/build_note.hpp>

namespace {

constexpr std::size_t padded_to_4(std::size_t n) { return (n + 3) / 4 * 4; }

// The ELF note layout: three words, then the name and the descriptor, each
// padded to 4 bytes. The sizes count the NUL of each string.
struct NpcBuildNote {
  std::uint32_t name_size;
  std::uint32_t desc_size;
  std::uint32_t type;
  char name[padded_to_4(sizeof npc::util::kBuildNoteOwner)];
  char desc[padded_to_4(sizeof NPC_VERSION)];
};

[[gnu::used, gnu::section(".note.neuron-parallel-compile"), gnu::aligned(4)]] constexpr NpcBuildNote kNpcBuildNote = {
    sizeof npc::util::kBuildNoteOwner, sizeof NPC_VERSION, npc::util::kBuildNoteType, "neuron-parallel-compile",
    NPC_VERSION};

static_assert(sizeof(NpcBuildNote) ==
              12 + padded_to_4(sizeof npc::util::kBuildNoteOwner) + padded_to_4(sizeof NPC_VERSION));
static_assert(std::string_view(kNpcBuildNote.name) == npc::util::kBuildNoteOwner);

} // namespace
