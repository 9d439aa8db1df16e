#include "env.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "error.h"

namespace standin {

std::optional<std::string> env_string(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

bool env_truthy(const char* name) {
  std::optional<std::string> value = env_string(name);
  if (!value) return false;
  std::string lower = *value;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower == "1" || lower == "true" || lower == "yes" || lower == "on";
}

std::uint64_t parse_u64(const std::string& text, const std::string& what) {
  // strtoull accepts a leading '-' and wraps it around; reject it up front.
  const bool all_digits =
      !text.empty() && std::all_of(text.begin(), text.end(),
                                   [](unsigned char c) { return std::isdigit(c) != 0; });
  if (!all_digits) throw usage_error(what + " must be a non-negative integer, got '" + text + "'");
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE) throw usage_error(what + " is out of range: '" + text + "'");
  return value;
}

std::uint64_t parse_bytes(const std::string& text, const std::string& what) {
  static constexpr std::uint64_t kKibi = 1024;
  std::string digits = text;
  std::uint64_t multiplier = 1;
  if (!digits.empty()) {
    switch (std::toupper(static_cast<unsigned char>(digits.back()))) {
      case 'K': multiplier = kKibi; break;
      case 'M': multiplier = kKibi * kKibi; break;
      case 'G': multiplier = kKibi * kKibi * kKibi; break;
      default: break;
    }
    if (multiplier != 1) digits.pop_back();
  }
  const std::uint64_t count = parse_u64(digits, what);
  if (count > std::numeric_limits<std::uint64_t>::max() / multiplier) {
    throw usage_error(what + " is out of range: '" + text + "'");
  }
  return count * multiplier;
}

std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  std::optional<std::string> value = env_string(name);
  return value ? parse_u64(*value, name) : fallback;
}

double env_double(const char* name, double fallback) {
  std::optional<std::string> value = env_string(name);
  if (!value) return fallback;
  char* end = nullptr;
  errno = 0;
  const double parsed = std::strtod(value->c_str(), &end);
  if (errno != 0 || end == value->c_str() || *end != '\0' || !std::isfinite(parsed) ||
      parsed < 0) {
    throw usage_error(std::string(name) + " must be a non-negative number, got '" + *value + "'");
  }
  return parsed;
}

std::optional<std::uint64_t> env_bytes(const char* name) {
  std::optional<std::string> value = env_string(name);
  if (!value) return std::nullopt;
  return parse_bytes(*value, name);
}

}  // namespace standin
