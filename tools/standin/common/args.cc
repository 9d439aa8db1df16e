#include "args.h"

#include <cerrno>
#include <cstdlib>

#include "error.h"

namespace standin {

OptionWord split_option(std::string_view word) {
  if (word.size() > 2 && word.substr(0, 2) == "--") {
    const std::size_t equals = word.find('=');
    if (equals != std::string_view::npos) {
      return {std::string(word.substr(0, equals)), std::string(word.substr(equals + 1))};
    }
  }
  return {std::string(word), std::nullopt};
}

bool looks_like_option(std::string_view word) {
  if (word.size() < 2 || word[0] != '-') return false;
  char* end = nullptr;
  const std::string text(word);
  std::strtod(text.c_str(), &end);
  const bool is_number = end != nullptr && *end == '\0';
  return !is_number;
}

std::string take_value(const std::vector<std::string>& args, std::size_t& index,
                       const OptionWord& option) {
  if (option.inline_value) return *option.inline_value;
  if (index + 1 >= args.size() || looks_like_option(args[index + 1])) {
    throw usage_error("argument " + option.name + ": expected one argument");
  }
  ++index;
  return args[index];
}

long parse_int_option(const std::string& option, const std::string& value, long min, long max) {
  char* end = nullptr;
  errno = 0;
  const long parsed = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno == ERANGE) {
    throw usage_error("argument " + option + ": invalid int value: '" + value + "'");
  }
  if (parsed < min || parsed > max) {
    throw usage_error("argument " + option + ": must be between " + std::to_string(min) +
                      " and " + std::to_string(max) + ", got " + value);
  }
  return parsed;
}

}  // namespace standin
