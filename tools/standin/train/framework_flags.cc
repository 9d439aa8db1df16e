#include "framework_flags.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "args.h"
#include "env.h"
#include "error.h"
#include "shell_words.h"

namespace standin::train {
namespace {

constexpr std::array<std::string_view, 5> kIgnoredValueOptions{
    "--cache_size", "--cache_ttl", "--log_level", "--dump", "--compile_workdir"};

bool is_ignored_value_option(const std::string& name) {
  return std::find(kIgnoredValueOptions.begin(), kIgnoredValueOptions.end(), name) !=
         kIgnoredValueOptions.end();
}

}  // namespace

std::string effective_neuron_cc_flags(const std::optional<std::string>& script_cache_dir) {
  std::string flags = env_string(kNeuronCcFlagsEnv).value_or("");
  if (script_cache_dir) flags += " --cache_dir=" + *script_cache_dir;
  return flags;
}

FrameworkFlags parse_framework_flags(const std::string& neuron_cc_flags) {
  const std::vector<std::string> words = split_shell_words(neuron_cc_flags, kNeuronCcFlagsEnv);
  FrameworkFlags flags;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const OptionWord option = split_option(words[i]);
    const std::string& name = option.name;
    const auto value = [&] {
      try {
        return take_value(words, i, option);
      } catch (const StandinError& error) {
        throw usage_error(std::string(kNeuronCcFlagsEnv) + ": " + error.what());
      }
    };
    const auto no_value = [&] {
      if (option.inline_value) {
        throw usage_error(std::string(kNeuronCcFlagsEnv) + ": argument " + name +
                          ": ignored explicit argument '" + *option.inline_value + "'");
      }
    };
    if (name == "--cache_dir") {
      flags.cache_dir = value();
    } else if (name == "--retry_failed_compilation") {
      no_value();
      flags.retry_failed_compilation = true;
    } else if (name == "--no_cache") {
      no_value();
    } else if (is_ignored_value_option(name)) {
      value();
    } else {
      flags.compiler_flags.push_back(words[i]);
    }
  }
  return flags;
}

}  // namespace standin::train
