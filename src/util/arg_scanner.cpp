#include <npc/util/arg_scanner.hpp>

#include <npc/util/error.hpp>

namespace npc::util {

std::optional<std::string> ArgScanner::take_value(std::string_view name) {
  if (done()) return std::nullopt;
  const std::string& word = words_[index_];
  if (word.size() > name.size() && word.starts_with(name) && word[name.size()] == '=') {
    ++index_;
    return word.substr(name.size() + 1);
  }
  if (word != name) return std::nullopt;
  if (index_ + 1 >= words_.size())
    throw UsageError(std::string(name) + " is missing its value");
  index_ += 2;
  return words_[index_ - 1];
}

bool ArgScanner::take_flag(std::string_view name) {
  if (done() || words_[index_] != name) return false;
  ++index_;
  return true;
}

} // namespace npc::util
