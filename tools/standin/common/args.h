// argparse-style handling of long options shared by both stand-ins: a value
// may be attached ("--opt=value") or be the next word ("--opt value").
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace standin {

struct OptionWord {
  std::string name;                         // "--opt" (or the whole word)
  std::optional<std::string> inline_value;  // "value" from "--opt=value"
};

// Splits "--name=value"; words not starting with "--" are returned whole.
OptionWord split_option(std::string_view word);

// True when argparse would read `word` as an option rather than a value:
// it starts with '-' and is not a negative number.
bool looks_like_option(std::string_view word);

// The value of `option`: its inline part, else args[index + 1], which is
// consumed (index advances). Throws a usage error like argparse's
// "argument --opt: expected one argument" when there is none.
std::string take_value(const std::vector<std::string>& args, std::size_t& index,
                       const OptionWord& option);

// Parses an integer option value in [min, max]; argparse-like message otherwise.
long parse_int_option(const std::string& option, const std::string& value, long min, long max);

}  // namespace standin
