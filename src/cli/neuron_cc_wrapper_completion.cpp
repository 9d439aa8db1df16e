// Build tool: writes neuron_cc_wrapper's bash completion script as a C++
// string literal, which the wrapper prints for --print-bash-completion. The
// wrapper itself does not link CLI11 (see kCompletionScript there).
//   neuron_cc_wrapper_completion OUTPUT.inc

#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include <npc/util/bash_completion.hpp>
#include <npc/util/fs.hpp>

namespace {

// The commands and options of kUsage as a CLI::App, for the completion
// script only: the commands are parsed by hand (compiler flags pass through
// unknown). tests/install checks that every option kUsage names is here.
// Kept in step with kUsage in cli/neuron_cc_wrapper.cpp by hand.
std::unique_ptr<CLI::App> completion_command_line() {
  auto app = std::make_unique<CLI::App>("", "neuron_cc_wrapper");
  app->set_version_flag("--version", "");
  auto add_common = [](CLI::App& command) {
    command.add_option("--compiler")->type_name("PATH");
    command.add_option("--timeout")->type_name("SECONDS");
    command.add_option("--lock-timeout")->type_name("SECONDS");
    command.add_option("--secondary-cache")->type_name("DIR");
    // NEURON_CC_FLAGS's cache options, also taken from the command line.
    command.add_option("--cache_dir")->type_name("DIR");
    command.add_flag("--no_cache");
    command.add_option("--cache_size")->type_name("BYTES");
    command.add_option("--cache_ttl")->type_name("DAYS");
    command.add_flag("--retry_failed_compilation");
    command.add_option("--log_level")->type_name("{DEBUG,INFO,WARNING,ERROR}");
  };
  auto* compile = app->add_subcommand("compile");
  compile->add_option("--graph")->type_name("FILE");
  compile->add_option("--output")->type_name("NEFF");
  compile->add_option("--cache-key")->type_name("NAME");
  add_common(*compile);
  auto* compile_entry = app->add_subcommand("compile-entry");
  compile_entry->add_option("DIR");
  compile_entry->add_flag("--no-evict");
  compile_entry->add_flag("--no-wait");
  compile_entry->add_option("--result-file")->type_name("FILE");
  compile_entry->add_option("--shared-cache")->type_name("URL");
  compile_entry->add_option("--run")->type_name("NAME");
  compile_entry->add_option("--run-by")->type_name("WHO");
  compile_entry->add_flag("--last-attempt");
  add_common(*compile_entry);
  auto* key = app->add_subcommand("key");
  key->add_option("--graph")->type_name("FILE");
  add_common(*key);
  return app;
}

constexpr const char* kDelimiter = "NPC_COMPLETION";

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: neuron_cc_wrapper_completion OUTPUT.inc\n");
    return 2;
  }
  std::string script = npc::util::bash_completion_script(*completion_command_line());
  if (script.find(std::string(")") + kDelimiter) != std::string::npos) {
    std::fprintf(stderr, "neuron_cc_wrapper_completion: the script contains the literal's delimiter\n");
    return 1;
  }
  auto s = npc::util::write_file_atomic(argv[1], std::string("R\"") + kDelimiter + "(" + script + ")" +
                                                    kDelimiter + "\"\n");
  if (!s) {
    std::fprintf(stderr, "neuron_cc_wrapper_completion: %s\n", s.error().c_str());
    return 1;
  }
  return 0;
}
