#pragma once
// `neuron_cache masquerade-dir`: the directory to put first on PATH so that a
// frontend's `neuronx-cc` is neuron_cc_wrapper as the compiler
// (cli/as_neuronx_cc.hpp). An installation ships one,
// <prefix>/libexec/neuron-parallel-compile/masquerade, holding only
// neuronx-cc -> ../../../bin/neuron_cc_wrapper (as ccache's /usr/lib/ccache);
// --create DIR makes one anywhere, linked to this installation's wrapper.

#include <filesystem>
#include <optional>

namespace npc::cli {

namespace fs = std::filesystem;

// Prints the directory. Throws EnvironmentError when there is none to print.
int cmd_masquerade_dir(const std::optional<fs::path>& create);

} // namespace npc::cli
