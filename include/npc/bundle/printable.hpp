#pragma once
// Text from a bundle (a member name, a key as written in the manifest) may
// hold anything: control characters that rewrite the terminal, megabytes of
// it. Messages show it through printable().

#include <string>
#include <string_view>

namespace npc::bundle {

// At most this many characters of it are shown: enough to recognise a name.
inline constexpr std::size_t kMaxPrintedChars = 300;

// Every byte outside printable ASCII becomes '?'; a longer text is cut and
// ends in "...".
[[nodiscard]] inline std::string printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, kMaxPrintedChars)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  if (text.size() > kMaxPrintedChars) out += "...";
  return out;
}

} // namespace npc::bundle
