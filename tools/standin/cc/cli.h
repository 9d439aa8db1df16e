// Command line of the stand-in compiler, parsed the way neuronx-cc's argparse
// parser does: same options, same "error: ..." messages, exit status 2.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace standin::cc {

inline constexpr char kProgramName[] = "neuronx-cc";
inline constexpr char kDefaultFramework[] = "XLA";
inline constexpr char kDefaultTarget[] = "trn1";

struct CompileRequest {
  std::string graph_path;
  std::string output_path;
  std::string framework = kDefaultFramework;
  std::string target = kDefaultTarget;
  // The compiler flags as recorded in the NEFF header: every word of the
  // command line in order, minus the graph path, --output and --framework
  // with their values, and minus the values (paths) of --logfile/--workdir.
  std::vector<std::string> flag_words;
  std::optional<std::string> logfile;
};

enum class CommandKind { kVersion, kHelp, kCompileHelp, kCompile };

struct Command {
  CommandKind kind = CommandKind::kHelp;
  CompileRequest compile;
};

// Throws StandinError(kExitUsage) with argparse's message on a bad command line.
Command parse_command_line(const std::vector<std::string>& args);

// Usage texts printed for -h/--help.
const char* top_level_usage();
const char* compile_usage();

}  // namespace standin::cc
