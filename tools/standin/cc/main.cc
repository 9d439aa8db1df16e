// Stand-in for the AWS Neuron compiler `neuronx-cc`: same command line,
// deterministic fake NEFFs, and configurable cost and faults (see README.md).
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"
#include "compile.h"
#include "error.h"
#include "settings.h"

using standin::StandinError;
using namespace standin::cc;

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  bool compiling = false;
  try {
    const Command command = parse_command_line(args);
    switch (command.kind) {
      case CommandKind::kVersion:
        std::cout << "NeuronX Compiler version " << load_version() << std::endl;
        return 0;
      case CommandKind::kHelp:
        std::cout << top_level_usage();
        return 0;
      case CommandKind::kCompileHelp:
        std::cout << compile_usage();
        return 0;
      case CommandKind::kCompile:
        break;
    }
    const Settings settings = load_settings();
    compiling = true;
    return run_compile(command.compile, settings);
  } catch (const StandinError& error) {
    std::cerr << kProgramName << ": error: " << error.what() << std::endl;
    if (compiling) std::cerr << "Compiler status ERROR" << std::endl;
    return error.exit_code();
  } catch (const std::exception& error) {
    std::cerr << kProgramName << ": error: " << error.what() << std::endl;
    return standin::kExitFailure;
  }
}
