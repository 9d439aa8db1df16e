#pragma once
// What the install tests share: where the build directory is, the files an
// install must hold, and small readers of program output.

#include <filesystem>
#include <string>
#include <vector>

namespace npc::test::install {

namespace fs = std::filesystem;

inline const std::vector<std::string> kPrograms = {"neuron_cache", "neuron_cc_wrapper", "neuron_parallel_compile"};

// The masquerade directory's one file, and where the link points.
inline const std::string kMasqueradeLink = "libexec/neuron-parallel-compile/masquerade/neuronx-cc";
inline const std::string kMasqueradeTarget = "../../../bin/neuron_cc_wrapper";

fs::path build_dir();
// Relative to the install prefix, sorted: the programs, their man pages and
// completion scripts, README.md and docs/*.md of the source tree, Debian's
// copyright and changelog.gz.
std::vector<std::string> expected_install_files();
// Files and symlinks under `root`, relative to it, sorted.
std::vector<std::string> files_under(const fs::path& root);
// Every distinct `--word` in `text`, sorted ("--" alone left out).
std::vector<std::string> long_options_in(const std::string& text);
// Lines of `text`, sorted; no empty last line.
std::vector<std::string> sorted_lines(const std::string& text);
// A roff source with font escapes dropped and "\-" made "-": how its words read.
std::string roff_words(const std::string& roff);

} // namespace npc::test::install
