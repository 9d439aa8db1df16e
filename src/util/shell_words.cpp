#include <npc/util/shell_words.hpp>

namespace npc::util {

namespace {
bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
} // namespace

Result<std::vector<std::string>> split_shell_words(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (is_blank(c)) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      ++i;
    } else if (c == '\'') {
      size_t close = text.find('\'', i + 1);
      if (close == std::string_view::npos)
        return fail("unbalanced single quote at position " + std::to_string(i + 1));
      word.append(text.substr(i + 1, close - i - 1));
      in_word = true;
      i = close + 1;
    } else if (c == '"') {
      size_t open = i++;
      bool closed = false;
      while (i < text.size()) {
        char d = text[i];
        if (d == '"') {
          closed = true;
          ++i;
          break;
        }
        if (d == '\\' && i + 1 < text.size()) {
          char next = text[i + 1];
          if (next == '"' || next == '\\' || next == '$' || next == '`') {
            word.push_back(next);
            i += 2;
            continue;
          }
          if (next == '\n') { // line continuation
            i += 2;
            continue;
          }
        }
        word.push_back(d);
        ++i;
      }
      if (!closed) return fail("unbalanced double quote at position " + std::to_string(open + 1));
      in_word = true;
    } else if (c == '\\') {
      if (i + 1 >= text.size())
        return fail("trailing backslash at position " + std::to_string(i + 1));
      if (text[i + 1] != '\n') {
        word.push_back(text[i + 1]);
        in_word = true;
      }
      i += 2;
    } else {
      word.push_back(c);
      in_word = true;
      ++i;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

std::string quote_shell_word(std::string_view word) {
  bool plain = !word.empty();
  for (char c : word) {
    bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                std::string_view("-_=./,:+@%").find(c) != std::string_view::npos;
    if (!safe) {
      plain = false;
      break;
    }
  }
  if (plain) return std::string(word);
  std::string quoted = "'";
  for (char c : word) {
    if (c == '\'')
      quoted += "'\\''";
    else
      quoted.push_back(c);
  }
  quoted.push_back('\'');
  return quoted;
}

std::string join_shell_words(const std::vector<std::string>& words) {
  std::string joined;
  for (const auto& w : words) {
    if (!joined.empty()) joined.push_back(' ');
    joined += quote_shell_word(w);
  }
  return joined;
}

} // namespace npc::util
