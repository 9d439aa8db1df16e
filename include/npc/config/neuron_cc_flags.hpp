#pragma once
// NEURON_CC_FLAGS: compiler flags plus the framework's own options (the
// cache's, --dump and --compile_workdir), which are taken out (in both
// --opt=value and --opt value forms) and never reach the compiler. Every
// other word is a compiler flag and is passed on untouched, in order.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <npc/util/log.hpp>

namespace npc::config {

namespace fs = std::filesystem;

// torch-neuronx documents a 100GB default; we read "GB" as 10^9 bytes.
inline constexpr std::uint64_t kDefaultCacheSizeBytes = 100ULL * 1000 * 1000 * 1000;
// torch-neuronx's default: an entry used within 30 days is never evicted.
inline constexpr double kDefaultCacheTtlDays = 30;
// A longer TTL is the same as this one: nothing is that old.
inline constexpr double kMaxCacheTtlDays = 36500;
inline constexpr const char* kDefaultCacheRoot = "/var/tmp/neuron-compile-cache";
// Old releases put the cache at DIR/neuron-compile-cache for --cache_dir=DIR;
// current ones use DIR itself. Caches of both kinds are on users' disks.
inline constexpr const char* kCacheDirName = "neuron-compile-cache";
// Where the entries of a remote cache (s3://bucket/prefix) are compiled and
// kept on this machine: <mirror>/s3/<bucket>/<prefix>, a local cache of its
// own (see cache/shared_tier.hpp). NEURON_COMPILE_CACHE_MIRROR moves it.
inline constexpr const char* kDefaultMirrorRoot = "/var/tmp/neuron-compile-cache-mirror";
inline constexpr const char* kMirrorEnv = "NEURON_COMPILE_CACHE_MIRROR";

struct CacheSettings {
  std::optional<fs::path> cache_dir; // --cache_dir=DIR: the cache root (see resolve_cache_root)
  bool no_cache = false;
  std::optional<std::uint64_t> cache_size;
  std::optional<double> cache_ttl_days;
  bool retry_failed_compilation = false;
  std::optional<util::LogLevel> log_level;
  std::optional<fs::path> dump_dir;        // --dump=DIR: keep each compile's artifacts under DIR
  std::optional<fs::path> compile_workdir; // --compile_workdir=DIR: where compiles run

  [[nodiscard]] std::uint64_t size_limit() const { return cache_size.value_or(kDefaultCacheSizeBytes); }
  [[nodiscard]] std::chrono::seconds ttl() const;
  // Later settings (e.g. from the command line) override earlier ones.
  void merge(const CacheSettings& later);
};

struct NeuronCcFlags {
  CacheSettings cache;
  std::vector<std::string> compiler_flags;
};

// Splits and parses NEURON_CC_FLAGS. Throws UsageError naming the variable,
// the option and the bad value (or the position of an unbalanced quote).
[[nodiscard]] NeuronCcFlags parse_neuron_cc_flags(std::string_view text);

// Takes the cache options out of already-split words. `source` names where
// the words came from, for error messages.
[[nodiscard]] NeuronCcFlags split_cache_options(const std::vector<std::string>& words,
                                                std::string_view source);

// NEURON_CC_FLAGS from the environment (empty when unset).
[[nodiscard]] NeuronCcFlags neuron_cc_flags_from_environment();

// Where the cache is: a local root, or a remote one (s3://) with the local
// mirror its entries are compiled and served from.
struct CacheLocation {
  fs::path root;                     // the local cache, or the remote's mirror
  std::optional<std::string> remote; // "s3://bucket/prefix" (no trailing '/')
};

// The cache: DIR with --cache_dir=DIR (current releases), except that when
// DIR holds no neuronxcc-* but DIR/neuron-compile-cache does (a cache of an
// old release, or of this tool before it followed them), that one, said
// once per process; else NEURON_COMPILE_CACHE_URL (a path, a file:// URL or
// an s3:// URL), else the default. An s3://bucket/prefix cache is used
// through the mirror <mirror_base>/s3/<bucket>/<prefix>. Another URL scheme,
// or an s3:// URL without a bucket, is a UsageError.
[[nodiscard]] CacheLocation resolve_cache_location(const CacheSettings& settings,
                                                   const std::optional<std::string>& cache_url,
                                                   const fs::path& mirror_base = kDefaultMirrorRoot);

} // namespace npc::config
