#include "cli.h"

#include <algorithm>
#include <string_view>

#include "args.h"
#include "error.h"

namespace standin::cc {
namespace {

// What an option does to the recorded flag list and to the request.
enum class OptionRole {
  kSwitch,    // no value; recorded verbatim
  kValue,     // takes a value; recorded verbatim
  kFramework, // takes a value; not recorded (fixed by the caller)
  kOutput,    // takes a value; not recorded
  kTarget,    // takes a value; recorded and also sets the header's target
  kPath,      // takes a path; only the option name is recorded
  kLogfile,   // like kPath, and the compiler also writes its log there
  kHelp,
};

struct OptionSpec {
  std::string_view name;
  OptionRole role;
  std::vector<std::string_view> choices;  // empty: any value
};

const std::vector<OptionSpec>& option_specs() {
  static const std::vector<OptionSpec> specs = {
      {"--framework", OptionRole::kFramework, {"XLA", "TENSORFLOW", "PYTORCH"}},
      {"--output", OptionRole::kOutput, {}},
      {"-o", OptionRole::kOutput, {}},
      {"--target", OptionRole::kTarget, {"trn1", "trn1n", "trn2", "inf2"}},
      {"-O1", OptionRole::kSwitch, {}},
      {"-O2", OptionRole::kSwitch, {}},
      {"-O3", OptionRole::kSwitch, {}},
      {"-O", OptionRole::kValue, {"1", "2", "3"}},
      {"--optlevel", OptionRole::kValue, {"1", "2", "3"}},
      {"--model-type", OptionRole::kValue, {"generic", "transformer", "unet-inference", "cnn-training"}},
      {"--auto-cast", OptionRole::kValue, {"none", "matmult", "all"}},
      {"--auto-cast-type", OptionRole::kValue, {"bf16", "fp16", "tf32", "fp8_e4m3"}},
      {"--enable-fast-loading-neuron-binaries", OptionRole::kSwitch, {}},
      {"--enable-saturate-infinity", OptionRole::kSwitch, {}},
      {"--enable-mixed-precision-accumulation", OptionRole::kSwitch, {}},
      {"--distribution-strategy", OptionRole::kValue, {}},
      {"--logfile", OptionRole::kLogfile, {}},
      {"--verbose", OptionRole::kValue, {"debug", "info", "warning", "error", "critical"}},
      {"--workdir", OptionRole::kPath, {}},
      {"--lnc", OptionRole::kValue, {"1", "2"}},
      {"--logical-nc-config", OptionRole::kValue, {"1", "2"}},
      {"--pipeline", OptionRole::kValue, {}},
      {"--tensorizer-options", OptionRole::kValue, {}},
      {"-h", OptionRole::kHelp, {}},
      {"--help", OptionRole::kHelp, {}},
  };
  return specs;
}

const OptionSpec* find_spec(std::string_view name) {
  for (const OptionSpec& spec : option_specs()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

// Flags the real compiler treats as developer knobs: any "--internal-*" word
// is accepted, with or without "=value", and never consumes the next word.
bool is_internal_flag(std::string_view word) {
  static constexpr std::string_view kInternalPrefix = "--internal-";
  return word.size() > kInternalPrefix.size() && word.substr(0, kInternalPrefix.size()) == kInternalPrefix;
}

void check_choice(const OptionSpec& spec, const std::string& value) {
  if (spec.choices.empty()) return;
  if (std::find(spec.choices.begin(), spec.choices.end(), value) != spec.choices.end()) return;
  std::string allowed;
  for (std::string_view choice : spec.choices) {
    allowed += (allowed.empty() ? "'" : ", '") + std::string(choice) + "'";
  }
  throw usage_error("argument " + std::string(spec.name) + ": invalid choice: '" + value +
                    "' (choose from " + allowed + ")");
}

std::string join_words(const std::vector<std::string>& words) {
  std::string joined;
  for (const std::string& word : words) joined += (joined.empty() ? "" : " ") + word;
  return joined;
}

// Returns false when -h/--help was given.
bool parse_compile_args(const std::vector<std::string>& args, CompileRequest& request) {
  std::vector<std::string> unrecognized;
  bool have_graph = false;
  bool have_output = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (is_internal_flag(word)) {
      request.flag_words.push_back(word);
      continue;
    }
    if (!looks_like_option(word)) {
      // The single positional argument is the graph; argparse reports any
      // further positional words as unrecognized.
      if (have_graph) {
        unrecognized.push_back(word);
      } else {
        request.graph_path = word;
        have_graph = true;
      }
      continue;
    }
    const OptionWord option = split_option(word);
    const OptionSpec* spec = find_spec(option.name);
    if (spec == nullptr) {
      unrecognized.push_back(word);
      continue;
    }
    if (spec->role == OptionRole::kHelp) return false;
    if (spec->role == OptionRole::kSwitch) {
      if (option.inline_value) {
        throw usage_error("argument " + option.name + ": ignored explicit argument '" +
                          *option.inline_value + "'");
      }
      request.flag_words.push_back(word);
      continue;
    }
    const std::size_t first_word = i;
    const std::string value = take_value(args, i, option);
    check_choice(*spec, value);
    switch (spec->role) {
      case OptionRole::kFramework:
        request.framework = value;
        break;
      case OptionRole::kOutput:
        request.output_path = value;
        have_output = true;
        break;
      case OptionRole::kLogfile:
        request.logfile = value;
        request.flag_words.push_back(option.name);
        break;
      case OptionRole::kPath:
        request.flag_words.push_back(option.name);
        break;
      case OptionRole::kTarget:
        request.target = value;
        [[fallthrough]];
      default:
        for (std::size_t w = first_word; w <= i; ++w) request.flag_words.push_back(args[w]);
        break;
    }
  }
  // argparse checks required arguments before it complains about extras.
  std::vector<std::string> missing;
  if (!have_graph) missing.push_back("input_file");
  if (!have_output) missing.push_back("--output");
  if (!missing.empty()) {
    throw usage_error("the following arguments are required: " + join_words(missing));
  }
  if (!unrecognized.empty()) {
    throw usage_error("unrecognized arguments: " + join_words(unrecognized));
  }
  return true;
}

}  // namespace

Command parse_command_line(const std::vector<std::string>& args) {
  Command command;
  if (args.empty()) throw usage_error("the following arguments are required: command");
  const std::string& first = args.front();
  if (first == "--version") {
    command.kind = CommandKind::kVersion;
    return command;
  }
  if (first == "-h" || first == "--help") {
    command.kind = CommandKind::kHelp;
    return command;
  }
  if (first != "compile") {
    if (looks_like_option(first)) throw usage_error("unrecognized arguments: " + first);
    throw usage_error("argument command: invalid choice: '" + first + "' (choose from 'compile')");
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  command.kind = parse_compile_args(rest, command.compile) ? CommandKind::kCompile
                                                           : CommandKind::kCompileHelp;
  return command;
}

const char* top_level_usage() {
  return "usage: neuronx-cc [-h] [--version] {compile} ...\n"
         "\n"
         "Stand-in for the AWS Neuron compiler (neuronx-cc), for tests and demos.\n"
         "\n"
         "commands:\n"
         "  compile     compile a graph into a (stand-in) NEFF\n";
}

const char* compile_usage() {
  return "usage: neuronx-cc compile [-h] [--framework {XLA,TENSORFLOW,PYTORCH}] --output OUTPUT\n"
         "                          [--target {trn1,trn1n,trn2,inf2}] [-O1|-O2|-O3] [--optlevel N]\n"
         "                          [--model-type {generic,transformer,unet-inference,cnn-training}]\n"
         "                          [--auto-cast {none,matmult,all}]\n"
         "                          [--auto-cast-type {bf16,fp16,tf32,fp8_e4m3}]\n"
         "                          [--enable-fast-loading-neuron-binaries]\n"
         "                          [--enable-saturate-infinity]\n"
         "                          [--enable-mixed-precision-accumulation]\n"
         "                          [--distribution-strategy VALUE] [--logfile PATH]\n"
         "                          [--verbose {debug,info,warning,error,critical}]\n"
         "                          [--workdir DIR] [--lnc N] [--logical-nc-config N]\n"
         "                          [--pipeline VALUE] [--tensorizer-options VALUE]\n"
         "                          [--internal-*[=VALUE] ...]\n"
         "                          input_file\n";
}

}  // namespace standin::cc
