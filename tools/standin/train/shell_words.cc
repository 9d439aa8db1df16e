#include "shell_words.h"

#include <cctype>

#include "error.h"

namespace standin::train {

std::vector<std::string> split_shell_words(const std::string& text, const std::string& what) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;  // '' or "" make a word even when empty
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\') {
      if (++i == text.size()) throw usage_error(what + ": no character after the final backslash");
      word += text[i];
    } else if (c == '\'' || c == '"') {
      const char quote = c;
      for (++i;; ++i) {
        if (i >= text.size()) throw usage_error(what + ": no closing quotation (" + quote + ")");
        if (text[i] == quote) break;
        const bool escape = quote == '"' && text[i] == '\\' && i + 1 < text.size() &&
                            (text[i + 1] == '"' || text[i + 1] == '\\');
        if (escape) ++i;
        word += text[i];
      }
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

}  // namespace standin::train
