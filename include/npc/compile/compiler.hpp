#pragma once
// Finding the Neuron compiler and learning its version.
//
// Which compiler: --compiler PATH where a tool offers it, else $NEURON_CC,
// else `neuronx-cc` on PATH. Its version (from `<compiler> --version`) names
// the cache's neuronxcc-<version> folder. Asking takes seconds for the real
// compiler, so the answer is remembered per compiler binary (by path, inode,
// size and mtime: reinstalling it changes them) under <cache root>/.npc.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace npc::compile {

namespace fs = std::filesystem;

inline constexpr const char* kCompilerEnv = "NEURON_CC";
inline constexpr const char* kCompilerName = "neuronx-cc";

// Throws EnvironmentError saying what was searched and how to point at it.
[[nodiscard]] fs::path locate_compiler(const std::optional<std::string>& from_command_line);

// First version-like token: "NeuronX Compiler version 2.14.213.0+013d129b"
// gives "2.14.213.0+013d129b".
[[nodiscard]] std::optional<std::string> parse_version_output(std::string_view output);

// The compiler's version, from the memo in `memo_dir` when it is there (and
// written there when it was not; memo_dir may be empty for no memo). Throws
// EnvironmentError when the compiler does not answer with a version.
[[nodiscard]] std::string compiler_version(const fs::path& compiler, const fs::path& memo_dir);

} // namespace npc::compile
