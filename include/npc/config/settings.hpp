#pragma once
// The settings every program starts from: NEURON_CC_FLAGS (its cache options
// and the compiler flags), the command line's cache options over them, and
// the cache root they resolve to.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <npc/config/neuron_cc_flags.hpp>

namespace npc::config {

struct Settings {
  CacheSettings cache;                     // NEURON_CC_FLAGS, then the command line
  std::vector<std::string> compiler_flags; // NEURON_CC_FLAGS minus cache options
  std::filesystem::path cache_root;        // absolute, normalised (a remote cache's mirror)
  std::optional<std::string> shared_cache_url; // s3://bucket/prefix (see resolve_cache_location)
  // Whether hits, misses and time saved are counted in the cache
  // (cache/usage_stats.hpp): NEURON_COMPILE_CACHE_STATS, yes unless it says no.
  bool count_usage = true;
};

// Reads NEURON_CC_FLAGS, NEURON_COMPILE_CACHE_URL, NEURON_COMPILE_CACHE_MIRROR and
// NEURON_COMPILE_CACHE_STATS, applies `overrides`
// from the command line and sets the log level they ask for.
[[nodiscard]] Settings settings_from_environment(const CacheSettings& overrides);

} // namespace npc::config
