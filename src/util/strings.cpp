#include <npc/util/strings.hpp>

#include <npc/util/error.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace npc::util {

std::string to_lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return text;
}

static std::optional<double> parse_decimal(std::string_view text) {
  if (text.empty()) return std::nullopt;
  for (char c : text)
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.') return std::nullopt;
#if defined(__cpp_lib_to_chars)
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
    return std::nullopt;
  return value;
#else // libstdc++ before 11: no from_chars for double (the text is digits and '.' only)
  std::string copy(text);
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(copy.c_str(), &end);
  if (errno != 0 || end != copy.c_str() + copy.size() || !std::isfinite(value)) return std::nullopt;
  return value;
#endif
}

std::optional<std::uint64_t> parse_bytes(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.'))
    ++digits;
  auto number = parse_decimal(text.substr(0, digits));
  if (!number) return std::nullopt;
  std::string suffix = to_lower(text.substr(digits));
  if (!suffix.empty() && suffix.back() == 'b') suffix.pop_back();
  double scale = 1;
  if (suffix.empty()) scale = 1;
  else if (suffix == "k") scale = 1e3;
  else if (suffix == "m") scale = 1e6;
  else if (suffix == "g") scale = 1e9;
  else if (suffix == "t") scale = 1e12;
  else if (suffix == "ki") scale = 1024.0;
  else if (suffix == "mi") scale = 1024.0 * 1024;
  else if (suffix == "gi") scale = 1024.0 * 1024 * 1024;
  else if (suffix == "ti") scale = 1024.0 * 1024 * 1024 * 1024;
  else return std::nullopt;
  double bytes = *number * scale;
  if (bytes > 1.8e19) return std::nullopt;
  if (suffix.empty() && std::floor(*number) != *number) return std::nullopt; // "1.5" bytes
  return static_cast<std::uint64_t>(bytes);
}

std::optional<double> parse_non_negative(std::string_view text) { return parse_decimal(text); }

std::optional<std::chrono::milliseconds> parse_positive_seconds(std::string_view text) {
  constexpr double kMaxSeconds = 1e9; // 31 years: no overflow in any clock arithmetic
  auto seconds = parse_decimal(text);
  if (!seconds || *seconds > kMaxSeconds) return std::nullopt;
  auto ms = std::chrono::milliseconds(static_cast<long long>(*seconds * 1000));
  if (ms.count() <= 0) return std::nullopt;
  return ms;
}

std::optional<long long> parse_integer(std::string_view text, long long min, long long max) {
  long long value = 0;
  if (text.empty()) return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (value < min || value > max) return std::nullopt;
  return value;
}

bool is_truthy(std::string_view value) {
  auto v = to_lower(trim(value));
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

Result<std::string> percent_decode(std::string_view text) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    bool complete = i + 2 < text.size();
    int high = complete ? hex(text[i + 1]) : -1;
    int low = complete ? hex(text[i + 2]) : -1;
    if (high < 0 || low < 0 || (high == 0 && low == 0)) // %00 would cut a path short
      return fail("'" + std::string(text.substr(i, 3)) + "' at position " + std::to_string(i + 1) +
                  " is not a percent escape of a byte");
    out.push_back(static_cast<char>(high * 16 + low));
    i += 2;
  }
  return out;
}

bool env_flag(const char* name) {
  auto value = env(name);
  if (!value) return false;
  auto v = to_lower(trim(*value));
  if (v.empty() || v == "0" || v == "false" || v == "no" || v == "off") return false;
  if (is_truthy(v)) return true;
  throw UsageError(std::string(name) + "=" + *value + ": not a yes/no value; set it to 1 (yes) or 0 (no), or unset it");
}

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  // Round to the one decimal shown before choosing the unit: 999999 bytes is
  // "1.0 MB", not "1000.0 kB".
  while (unit < 5 && std::round(value * 10) / 10 >= 1000) {
    value /= 1000;
    ++unit;
  }
  char buffer[32];
  if (unit == 0)
    std::snprintf(buffer, sizeof buffer, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buffer, sizeof buffer, "%.1f %s", value, kUnits[unit]);
  return buffer;
}

std::string format_seconds(double seconds) {
  char buffer[32];
  // Below a minute, tenths; the rounding decides the form (59.96 is "1m00s").
  double tenths = std::round(seconds * 10) / 10;
  if (tenths < 60) {
    std::snprintf(buffer, sizeof buffer, "%.1fs", tenths);
  } else if (seconds < 3600) {
    auto s = std::lround(seconds);
    std::snprintf(buffer, sizeof buffer, "%ldm%02lds", s / 60, s % 60);
  } else {
    auto s = std::lround(seconds);
    std::snprintf(buffer, sizeof buffer, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  }
  return buffer;
}

} // namespace npc::util

#include <ctime>
namespace npc::util {

std::int64_t to_unix_seconds(std::chrono::system_clock::time_point when) {
  return std::chrono::duration_cast<std::chrono::seconds>(when.time_since_epoch()).count();
}

std::string format_utc(std::chrono::system_clock::time_point when) {
  std::time_t t = static_cast<std::time_t>(to_unix_seconds(when));
  std::tm tm{};
  char buffer[32] = "?";
  if (::gmtime_r(&t, &tm) != nullptr) std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

std::string format_utc_ms(std::chrono::system_clock::time_point when) {
  const auto ms = std::chrono::floor<std::chrono::milliseconds>(when);
  const auto seconds = std::chrono::floor<std::chrono::seconds>(ms);
  std::string text = format_utc(seconds);
  char fraction[8];
  std::snprintf(fraction, sizeof fraction, ".%03d", static_cast<int>((ms - seconds).count()));
  text.insert(text.size() - 1, fraction);
  return text;
}

std::optional<std::chrono::system_clock::time_point> parse_utc(std::string_view text) {
  std::string t(trim(text));
  if (!t.empty() && t.back() == 'Z') t.pop_back();
  // A fraction of a second: up to nine digits after a '.' that follows the seconds.
  std::chrono::nanoseconds fraction{0};
  if (auto dot = t.rfind('.'); dot != std::string::npos && dot + 1 < t.size() && t.size() - dot - 1 <= 9 &&
                               t.find(':') != std::string::npos) {
    std::int64_t value = 0;
    for (std::size_t i = dot + 1; i < t.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(t[i]))) return std::nullopt;
      value = value * 10 + (t[i] - '0');
    }
    for (std::size_t digits = t.size() - dot - 1; digits < 9; ++digits) value *= 10;
    fraction = std::chrono::nanoseconds(value);
    t.erase(dot);
  }
  for (const char* format : {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"}) {
    std::tm tm{};
    const char* end = ::strptime(t.c_str(), format, &tm);
    if (end == nullptr || *end != '\0') continue;
    const std::time_t seconds = ::timegm(&tm);
    if (seconds == static_cast<std::time_t>(-1)) return std::nullopt;
    return std::chrono::system_clock::from_time_t(seconds) +
           std::chrono::duration_cast<std::chrono::system_clock::duration>(fraction);
  }
  return std::nullopt;
}

bool contains(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

} // namespace npc::util
