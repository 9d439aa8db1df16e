#include <npc/util/json_text.hpp>

#include <cstdint>

#include <npc/util/utf8.hpp>

namespace npc::util {

namespace {

// U+F8FF, a private-use character: the marker of the private form. A real one
// in a string is carried as the marker and "--", so nothing is ambiguous.
constexpr std::string_view kMarker = "\xEF\xA3\xBF";
constexpr std::string_view kMarkerEscape = "\\uf8ff";
constexpr std::string_view kLiteralMarkerSuffix = "--";
constexpr char kHexDigits[] = "0123456789abcdef";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The value of four hex digits at text[i], or -1.
long hex4(std::string_view text, std::size_t i) {
  if (i + 4 > text.size()) return -1;
  long value = 0;
  for (std::size_t k = 0; k < 4; ++k) {
    int digit = hex_value(text[i + k]);
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

void append_private_byte(std::string& out, unsigned char byte) {
  out += kMarker;
  out += kHexDigits[byte >> 4];
  out += kHexDigits[byte & 0xF];
}

// A raw (not escaped) byte sequence inside a JSON string at text[i], appended
// in the private form; returns how many bytes it took.
std::size_t append_raw_private(std::string& out, std::string_view text, std::size_t i) {
  std::size_t length = utf8_sequence_length(text, i);
  if (length == 0) {
    append_private_byte(out, static_cast<unsigned char>(text[i]));
    return 1;
  }
  if (text.substr(i, length) == kMarker) {
    out += kMarker;
    out += kLiteralMarkerSuffix;
  } else {
    out.append(text.substr(i, length));
  }
  return length;
}

} // namespace

namespace json_detail {

std::string to_private(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) i += append_raw_private(out, bytes, i);
  return out;
}

std::string from_private(const std::string& text) {
  if (text.find(kMarker) == std::string::npos) return text;
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    if (text.compare(i, kMarker.size(), kMarker) != 0 || i + kMarker.size() + 2 > text.size()) {
      out += text[i++];
      continue;
    }
    std::string_view suffix = std::string_view(text).substr(i + kMarker.size(), 2);
    int high = hex_value(suffix[0]), low = hex_value(suffix[1]);
    if (suffix == kLiteralMarkerSuffix) out += kMarker;
    else if (high >= 0 && low >= 0) out += static_cast<char>(high * 16 + low);
    else { out += text[i++]; continue; }
    i += kMarker.size() + 2;
  }
  return out;
}

std::string private_to_escapes(std::string_view dumped, JsonAscii ascii) {
  std::string out;
  out.reserve(dumped.size());
  for (std::size_t i = 0; i < dumped.size();) {
    std::size_t marker_length = 0;
    if (dumped.compare(i, kMarker.size(), kMarker) == 0) marker_length = kMarker.size();
    else if (dumped.compare(i, kMarkerEscape.size(), kMarkerEscape) == 0) marker_length = kMarkerEscape.size();
    else if (dumped[i] == '\\' && i + 1 < dumped.size()) { // any other escape, such as "\\", whole
      out.append(dumped.substr(i, 2));
      i += 2;
      continue;
    }
    if (marker_length == 0 || i + marker_length + 2 > dumped.size()) {
      out += dumped[i++];
      continue;
    }
    std::string_view suffix = dumped.substr(i + marker_length, 2);
    if (suffix == kLiteralMarkerSuffix) out += ascii == JsonAscii::escaped ? kMarkerEscape : kMarker;
    else out.append("\\udc").append(suffix);
    i += marker_length + 2;
  }
  return out;
}

std::string escapes_to_private(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  bool after_high_surrogate = false;
  for (std::size_t i = 0; i < text.size();) {
    char c = text[i];
    if (!in_string) {
      in_string = c == '"';
      out += c;
      ++i;
      continue;
    }
    if (c == '"') {
      in_string = false;
      after_high_surrogate = false;
      out += c;
      ++i;
    } else if (c == '\\' && i + 1 < text.size()) {
      long code = text[i + 1] == 'u' ? hex4(text, i + 2) : -1;
      if (code >= 0xDC80 && code <= 0xDCFF && !after_high_surrogate) {
        append_private_byte(out, static_cast<unsigned char>(code & 0xFF));
      } else if (code == 0xF8FF) {
        out += kMarker;
        out += kLiteralMarkerSuffix;
      } else {
        out.append(text.substr(i, code >= 0 ? 6 : 2));
      }
      after_high_surrogate = code >= 0xD800 && code <= 0xDBFF;
      i += code >= 0 ? 6 : 2;
    } else {
      after_high_surrogate = false;
      i += append_raw_private(out, text, i);
    }
  }
  return out;
}

} // namespace json_detail

std::string json_string_text(std::string_view bytes) { return to_json_text(nlohmann::json(std::string(bytes))); }

} // namespace npc::util
