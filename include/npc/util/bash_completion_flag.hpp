#pragma once
// The hidden option that makes a program print its bash completion script
// (util/bash_completion.hpp), apart from CLI11 for the program that only
// prints a script made at build time (neuron_cc_wrapper).

#include <string_view>

namespace npc::util {

inline constexpr std::string_view kPrintBashCompletion = "--print-bash-completion";

} // namespace npc::util
