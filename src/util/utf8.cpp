#include <npc/util/utf8.hpp>

namespace npc::util {

namespace {

bool in_range(unsigned char c, unsigned lo, unsigned hi) { return c >= lo && c <= hi; }

void append_hex_escape(std::string& out, unsigned char byte) {
  constexpr char kHexDigits[] = "0123456789abcdef";
  out += "\\x";
  out += kHexDigits[byte >> 4];
  out += kHexDigits[byte & 0xF];
}

} // namespace

std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  auto at = [&](std::size_t k) -> unsigned char { return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0; };
  unsigned char b0 = at(0);
  if (b0 < 0x80) return 1;
  auto cont = [&](std::size_t k) { return in_range(at(k), 0x80, 0xBF); };
  if (in_range(b0, 0xC2, 0xDF)) return cont(1) ? 2 : 0;
  if (b0 == 0xE0) return in_range(at(1), 0xA0, 0xBF) && cont(2) ? 3 : 0;
  if (b0 == 0xED) return in_range(at(1), 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (in_range(b0, 0xE1, 0xEF)) return cont(1) && cont(2) ? 3 : 0;
  if (b0 == 0xF0) return in_range(at(1), 0x90, 0xBF) && cont(2) && cont(3) ? 4 : 0;
  if (in_range(b0, 0xF1, 0xF3)) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (b0 == 0xF4) return in_range(at(1), 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

std::string printable_text(std::string_view text, LineBreaks line_breaks) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    auto byte = static_cast<unsigned char>(text[i]);
    std::size_t length = utf8_sequence_length(text, i);
    if (length == 0) {
      append_hex_escape(out, byte);
      ++i;
      continue;
    }
    if (length == 1) {
      if (line_breaks == LineBreaks::keep && (byte == '\n' || byte == '\t')) {
        out += static_cast<char>(byte);
        ++i;
        continue;
      }
      switch (byte) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (byte < 0x20 || byte == 0x7F) append_hex_escape(out, byte);
        else out += static_cast<char>(byte);
      }
      ++i;
      continue;
    }
    // U+0080..U+009F, the C1 controls (0x9B is a terminal's CSI).
    if (length == 2 && byte == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
      append_hex_escape(out, byte);
      append_hex_escape(out, static_cast<unsigned char>(text[i + 1]));
    } else {
      out.append(text.substr(i, length));
    }
    i += length;
  }
  return out;
}

} // namespace npc::util
