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
  settings.cache_root =
      std::filesystem::absolute(resolve_cache_root(settings.cache, util::env("NEURON_COMPILE_CACHE_URL")))
          .lexically_normal();
  if (settings.cache.log_level) util::set_log_level(*settings.cache.log_level);
  return settings;
}

} // namespace npc::config
