#pragma once
// Reads "--name=value" and "--name value" options out of a word list in
// order, leaving every other word alone. Used where the words that are not
// ours must reach another program exactly as given (compiler flags), which
// a general-purpose parser cannot promise.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npc::util {

class ArgScanner {
public:
  explicit ArgScanner(std::vector<std::string> words) : words_(std::move(words)) {}

  [[nodiscard]] bool done() const { return index_ >= words_.size(); }
  [[nodiscard]] const std::string& peek() const { return words_[index_]; }
  std::string next() { return words_[index_++]; }

  // If the next word is `name` or `name=...`, consumes it (and the value
  // word in the two-word form) and returns the value. Throws UsageError when
  // the value is missing.
  [[nodiscard]] std::optional<std::string> take_value(std::string_view name);
  // If the next word is exactly `name`, consumes it.
  [[nodiscard]] bool take_flag(std::string_view name);

private:
  std::vector<std::string> words_;
  size_t index_ = 0;
};

} // namespace npc::util
