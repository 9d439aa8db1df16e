#pragma once
// Shell-like word splitting for NEURON_CC_FLAGS: blanks separate words,
// single quotes keep everything literal, double quotes keep all but \" \\ \$ \`
// escapes, a backslash outside quotes escapes the next character. No
// expansion of any kind is done: nothing here is a shell.

#include <string>
#include <string_view>
#include <vector>

#include <npc/util/result.hpp>

namespace npc::util {

// Fails on an unbalanced quote or a trailing backslash, naming the 1-based
// character position where the open quote (or backslash) stands.
[[nodiscard]] Result<std::vector<std::string>> split_shell_words(std::string_view text);

// Quotes a word for display so that split_shell_words gives it back.
[[nodiscard]] std::string quote_shell_word(std::string_view word);
[[nodiscard]] std::string join_shell_words(const std::vector<std::string>& words);

} // namespace npc::util
