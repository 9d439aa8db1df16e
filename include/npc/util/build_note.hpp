#pragma once
// Whether a file is a program of this project, however it got where it is
// (a link, a copy, a hard link, a rename): each of our programs carries an
// ELF note of its own (src/main/build_note.cpp), found without running the
// file (util/elf_note.hpp).
//
// Why a note: it is what a program says of itself in its own bytes, so it
// travels with every copy, survives `strip` (it is loaded, like the build
// id), and is found by reading a few hundred bytes at the start of the
// file, never the whole of it: cheap enough for every lookup of the
// compiler, a cache hit's too. A marker string searched through the file
// would read megabytes of a large compiler binary; a file name or a link's
// target says nothing of a copy; running the candidate (`--version`) costs
// a start and, for the real compiler, seconds. The real neuronx-cc can
// never match: it is a Python console script (no ELF at all), and an ELF
// build of it would carry no note of this owner, a name no other project
// uses.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace npc::util {

namespace fs = std::filesystem;

// The note: its owner's name, its type, and the version as its descriptor.
inline constexpr char kBuildNoteOwner[] = "neuron-parallel-compile";
inline constexpr std::uint32_t kBuildNoteType = 1;

// The version of ours the program at `path` is; nullopt for any other file.
[[nodiscard]] std::optional<std::string> build_of_ours(const fs::path& path);

} // namespace npc::util
