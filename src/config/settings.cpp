#include <npc/config/settings.hpp>

#include <npc/util/log.hpp>
#include <npc/util/strings.hpp>

namespace npc::config {

Settings settings_from_environment(const CacheSettings& overrides) {
  Settings settings;
  auto flags = neuron_cc_flags_from_environment();
  settings.cache = flags.cache;
  settings.cache.merge(overrides);
  settings.compiler_flags = std::move(flags.compiler_flags);
  auto mirror = util::env(kMirrorEnv);
  auto location = resolve_cache_location(settings.cache, util::env("NEURON_COMPILE_CACHE_URL"),
                                         mirror && !mirror->empty() ? fs::path(*mirror) : fs::path(kDefaultMirrorRoot));
  settings.cache_root = std::filesystem::absolute(location.root).lexically_normal();
  settings.shared_cache_url = std::move(location.remote);
  if (auto stats = util::env("NEURON_COMPILE_CACHE_STATS"); stats && !stats->empty())
    settings.count_usage = util::env_flag("NEURON_COMPILE_CACHE_STATS");
  if (settings.cache.log_level) util::set_log_level(*settings.cache.log_level);
  return settings;
}

} // namespace npc::config
