#pragma once
// Parsing a command line with CLI11 the way every program and subcommand
// does: --help and --version print and end the program with exit 0, a parse
// error becomes a UsageError (exit 2) that points at --help.

#include <CLI/CLI.hpp>

namespace npc::util {

void parse_command_line(CLI::App& app, int argc, char** argv);

// An option's check: a whole number from `min` to `max`. CLI11's own Range
// says "Value abc not in range" of a word; this says what is wrong with it.
[[nodiscard]] CLI::Validator whole_number(long long min, long long max);

} // namespace npc::util
