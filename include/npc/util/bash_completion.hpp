#pragma once
// A program's bash completion script, made from the same CLI::App that
// makes its --help, so the two cannot disagree: options, flags, subcommands
// and their options; names of files or directories for a value whose type
// name says FILE, PATH, NEFF, .json or DIR; the values of an option whose
// type name lists them as argparse shows choices ("{a,b,c}").
//
// Each program takes the hidden option `--print-bash-completion`, alone, and
// prints its script; the build writes it to the installed completion file.

#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include <npc/util/bash_completion_flag.hpp>

namespace npc::util {

// What comes after the program's options: nothing of its own, or (as for
// neuron_parallel_compile) a command whose words are completed as bash
// completes a command line.
enum class AfterOptions { nothing, command };

[[nodiscard]] std::string bash_completion_script(const CLI::App& app, AfterOptions after = AfterOptions::nothing);

// When argv is exactly `<program> --print-bash-completion`: prints the
// script to stdout and throws Error(ExitCode::success), as --help does.
void print_bash_completion_if_asked(const CLI::App& app, int argc, char** argv,
                                    AfterOptions after = AfterOptions::nothing);

} // namespace npc::util
