#pragma once
// neuron_cc_wrapper reached as `neuronx-cc` (or run as
// `neuron_cc_wrapper as-neuronx-cc WORDS...`): the masquerade that caches
// the compiles of every frontend that runs the compiler from PATH
// (TorchNeuron, vLLM-Neuron), in the cache NEURON_COMPILE_CACHE_URL names.
// What it reads of the command line and what keys a compile:
// compile/masquerade.hpp.
//
//   a hit         the NEFF, verified, written to --output; nothing printed
//   a miss        the real compiler run with the same words (its output
//                 to ours), the NEFF stored, then written to --output
//   a failure     the real compiler's exit status; nothing cached
//   an --output   that cannot be written (a missing or read-only folder, a
//                 directory): one line naming it, exit status 3, before
//                 any look in the cache; a NEFF compiled that cannot reach
//                 it (the folder went meanwhile) is cached and counted, and
//                 the real compiler does not run a second time for it
//   anything else (--version, another subcommand, options this does not
//                 know, no cache to be had) the real compiler, exec'd with
//                 the words untouched
//
// The cache never makes a compile fail: when it cannot be used (not
// writable, S3 unreachable, a publish that fails) the real compiler runs
// without it, with one warning. An output that cannot be written is no
// fault of the cache: the real compiler would fail on it too.

#include <functional>
#include <string>
#include <vector>

namespace npc::cli {

// `words`: the command line after the program name. `continue_in_s3_build`:
// what hands the command to the wrapper's S3 build (cli/neuron_cc_wrapper.cpp).
int as_neuronx_cc(const std::vector<std::string>& words, const std::function<void()>& continue_in_s3_build);

} // namespace npc::cli
