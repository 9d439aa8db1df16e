#pragma once
// Parsing a command line with CLI11 the way every program and subcommand
// does: --help and --version print and end the program with exit 0, a parse
// error becomes a UsageError (exit 2) that points at --help.

#include <CLI/CLI.hpp>

namespace npc::util {

void parse_command_line(CLI::App& app, int argc, char** argv);

} // namespace npc::util
