#include <npc/config/neuron_cc_flags.hpp>

#include <cmath>

#include <spdlog/spdlog.h>

#include <npc/util/error.hpp>
#include <npc/util/shell_words.hpp>
#include <npc/util/strings.hpp>

namespace npc::config {

namespace {

enum class Takes { nothing, value };

struct CacheOption {
  std::string_view name;
  Takes takes;
};

constexpr CacheOption kCacheOptions[] = {
    {"--cache_dir", Takes::value},     {"--no_cache", Takes::nothing},
    {"--cache_size", Takes::value},    {"--cache_ttl", Takes::value},
    {"--retry_failed_compilation", Takes::nothing}, {"--log_level", Takes::value},
    {"--dump", Takes::value},          {"--compile_workdir", Takes::value},
};

const CacheOption* find_option(std::string_view name) {
  for (const auto& option : kCacheOptions)
    if (option.name == name) return &option;
  return nullptr;
}

[[noreturn]] void bad_value(std::string_view source, std::string_view option,
                            std::string_view value, std::string_view expected) {
  throw UsageError(std::string(source) + ": " + std::string(option) + " has the bad value '" +
                   std::string(value) + "': expected " + std::string(expected));
}

void apply(CacheSettings& settings, std::string_view source, std::string_view name,
           const std::string& value) {
  if (name == "--cache_dir") {
    if (value.empty()) bad_value(source, name, value, "a directory path");
    settings.cache_dir = fs::path(value);
  } else if (name == "--no_cache") {
    settings.no_cache = true;
  } else if (name == "--cache_size") {
    auto bytes = util::parse_bytes(value);
    if (!bytes) bad_value(source, name, value, "a size in bytes such as 100000000000 or 100GB");
    settings.cache_size = *bytes;
  } else if (name == "--cache_ttl") {
    auto days = util::parse_non_negative(value);
    if (!days) bad_value(source, name, value, "a non-negative number of days such as 30");
    settings.cache_ttl_days = *days;
  } else if (name == "--retry_failed_compilation") {
    settings.retry_failed_compilation = true;
  } else if (name == "--dump") {
    if (value.empty()) bad_value(source, name, value, "a directory path");
    settings.dump_dir = fs::path(value);
  } else if (name == "--compile_workdir") {
    if (value.empty()) bad_value(source, name, value, "a directory path");
    settings.compile_workdir = fs::path(value);
  } else if (name == "--log_level") {
    util::LogLevel level{};
    if (!util::parse_log_level(value, level))
      bad_value(source, name, value, "one of DEBUG, INFO, WARNING, ERROR");
    settings.log_level = level;
  }
}

} // namespace

std::chrono::seconds CacheSettings::ttl() const {
  // Beyond a century a TTL means "never evict"; clamping keeps the arithmetic
  // on time points (in nanoseconds) from overflowing.
  double days = std::min(cache_ttl_days.value_or(kDefaultCacheTtlDays), kMaxCacheTtlDays);
  return std::chrono::seconds(static_cast<long long>(std::llround(days * 86400.0)));
}

void CacheSettings::merge(const CacheSettings& later) {
  if (later.cache_dir) cache_dir = later.cache_dir;
  no_cache = no_cache || later.no_cache;
  if (later.cache_size) cache_size = later.cache_size;
  if (later.cache_ttl_days) cache_ttl_days = later.cache_ttl_days;
  retry_failed_compilation = retry_failed_compilation || later.retry_failed_compilation;
  if (later.log_level) log_level = later.log_level;
  if (later.dump_dir) dump_dir = later.dump_dir;
  if (later.compile_workdir) compile_workdir = later.compile_workdir;
}

NeuronCcFlags split_cache_options(const std::vector<std::string>& words, std::string_view source) {
  NeuronCcFlags result;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    auto eq = word.find('=');
    std::string_view name = std::string_view(word).substr(0, eq);
    if (name == "--output")
      // Each compile writes its NEFF where the cache (or the caller) says; a
      // fixed --output would send every graph's NEFF to one place.
      throw UsageError(std::string(source) + ": --output is chosen for each compile by this tool; remove '" + word +
                       "' from the compiler flags");
    const CacheOption* option = find_option(name);
    if (option == nullptr) {
      result.compiler_flags.push_back(word);
      continue;
    }
    std::string value;
    if (option->takes == Takes::nothing) {
      if (eq != std::string::npos)
        throw UsageError(std::string(source) + ": " + std::string(name) +
                         " takes no value, but was given '" + word.substr(eq + 1) + "'");
    } else if (eq != std::string::npos) {
      value = word.substr(eq + 1);
    } else {
      if (i + 1 >= words.size() || words[i + 1].starts_with("--"))
        throw UsageError(std::string(source) + ": " + std::string(name) +
                         " is missing its value (write " + std::string(name) + "=VALUE)");
      value = words[++i];
    }
    apply(result.cache, source, name, value);
  }
  return result;
}

NeuronCcFlags parse_neuron_cc_flags(std::string_view text) {
  auto words = util::split_shell_words(text);
  if (!words) throw UsageError("NEURON_CC_FLAGS: " + words.error());
  return split_cache_options(*words, "NEURON_CC_FLAGS");
}

NeuronCcFlags neuron_cc_flags_from_environment() {
  auto text = util::env("NEURON_CC_FLAGS");
  if (!text) return {};
  return parse_neuron_cc_flags(*text);
}

namespace {

bool holds_version_dirs(const fs::path& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().starts_with("neuronxcc-")) return true;
  return false;
}

// --cache_dir=DIR: DIR is the root, unless only the old layout is there.
fs::path cache_dir_root(const fs::path& dir) {
  fs::path legacy = dir / kCacheDirName;
  if (holds_version_dirs(dir) || !holds_version_dirs(legacy)) return dir;
  static bool said = false;
  if (!said) {
    spdlog::info("using the cache {} (the layout of older releases): {} holds no neuronxcc-* directory",
                 legacy.string(), dir.string());
    said = true;
  }
  return legacy;
}

// "s3://bucket/prefix" (scheme in any case, no trailing '/') for an s3://
// URL; nullopt for anything else.
std::optional<std::string> s3_cache_url(const std::string& url, std::string_view source) {
  auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos || util::to_lower(url.substr(0, scheme_end)) != "s3") return std::nullopt;
  std::string rest = url.substr(scheme_end + 3);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  std::string bucket = rest.substr(0, rest.find('/'));
  if (bucket.empty())
    throw UsageError(std::string(source) + ": '" + url + "' names no bucket (write s3://bucket or s3://bucket/prefix)");
  for (std::string_view left = rest; !left.empty();) {
    auto slash = left.find('/');
    std::string_view part = left.substr(0, slash);
    left = slash == std::string_view::npos ? std::string_view() : left.substr(slash + 1);
    if (part.empty() || part == "." || part == ".." || (slash != std::string_view::npos && left.empty()))
      throw UsageError(std::string(source) + ": '" + url +
                       "' has an empty, '.' or '..' part in its prefix (write s3://bucket/prefix)");
  }
  return "s3://" + rest;
}

fs::path path_of_url(const std::string& url, std::string_view source) {
  auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return fs::path(url);
  std::string scheme = util::to_lower(url.substr(0, scheme_end));
  if (scheme == "file") {
    std::string path = url.substr(scheme_end + 3);
    // file://localhost/path names the same as file:///path (RFC 8089).
    if (util::to_lower(path).starts_with("localhost/")) path = path.substr(std::string_view("localhost").size());
    if (path.empty() || path.front() != '/')
      throw UsageError(std::string(source) + ": '" + url +
                       "' is not an absolute file:// URL (write file:///path/to/cache)");
    auto decoded = util::percent_decode(path);
    if (!decoded)
      throw UsageError(std::string(source) + ": '" + url + "': " + decoded.error() +
                       " (write a space as %20 and a % as %25)");
    return fs::path(*decoded);
  }
  throw UsageError(std::string(source) + ": the scheme '" + scheme + "://' of '" + url +
                   "' is not supported; use a local or mounted directory path, or s3://bucket/prefix");
}

} // namespace

CacheLocation resolve_cache_location(const CacheSettings& settings, const std::optional<std::string>& cache_url,
                                     const fs::path& mirror_base) {
  std::string text;
  std::string_view source;
  if (settings.cache_dir) {
    text = settings.cache_dir->string();
    source = "--cache_dir";
  } else if (cache_url && !cache_url->empty()) {
    text = *cache_url;
    source = "NEURON_COMPILE_CACHE_URL";
  } else {
    return {fs::path(kDefaultCacheRoot), std::nullopt};
  }
  if (auto remote = s3_cache_url(text, source)) {
    std::string bucket_and_prefix = remote->substr(std::string_view("s3://").size());
    return {mirror_base / "s3" / bucket_and_prefix, remote};
  }
  fs::path path = path_of_url(text, source);
  return {settings.cache_dir ? cache_dir_root(path) : path, std::nullopt};
}

} // namespace npc::config
