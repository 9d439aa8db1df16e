#include <npc/cli/common.hpp>

#include <iostream>
#include <sys/stat.h>

#include <spdlog/spdlog.h>

#include <npc/cache/trust.hpp>
#include <npc/util/error.hpp>
#include <npc/util/log.hpp>
#include <npc/util/strings.hpp>

namespace npc::cli {

int run_program(const std::string& program, const std::function<int()>& body) {
  util::setup_logging(program, util::LogLevel::info);
  try {
    return body();
  } catch (const Error& e) {
    if (e.code() == ExitCode::success) return 0; // --help or --version was printed
    spdlog::error("{}", e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    spdlog::error("internal error: {}", e.what());
    return static_cast<int>(ExitCode::failure);
  }
}

Settings load_settings(const config::CacheSettings& overrides) {
  Settings settings = config::settings_from_environment(overrides);
  if (cache::trust_mode_from_environment() == cache::TrustMode::shared_by_group) {
    // As ccache does for a shared cache: whatever we create in it, the group
    // may write too.
    mode_t old = ::umask(0);
    ::umask(old & ~static_cast<mode_t>(070));
  }
  return settings;
}

void add_cache_options(CLI::App& app, config::CacheSettings& settings,
                       std::string& cache_size_text, std::string& cache_ttl_text) {
  app.add_option_function<std::string>(
         "--cache_dir", [&settings](const std::string& dir) { settings.cache_dir = fs::path(dir); },
         "The cache root DIR (as --cache_dir in NEURON_CC_FLAGS; DIR/neuron-compile-cache of old releases when only it holds a cache)")
      ->type_name("DIR");
  app.add_option("--cache_size", cache_size_text, "Cache size limit in bytes (100GB = 10^11)")
      ->type_name("BYTES");
  app.add_option("--cache_ttl", cache_ttl_text, "Never evict entries used within DAYS")
      ->type_name("DAYS");
}

void finish_cache_options(config::CacheSettings& settings, const std::string& cache_size_text,
                          const std::string& cache_ttl_text) {
  std::vector<std::string> words;
  if (!cache_size_text.empty()) words.push_back("--cache_size=" + cache_size_text);
  if (!cache_ttl_text.empty()) words.push_back("--cache_ttl=" + cache_ttl_text);
  if (words.empty()) return;
  settings.merge(config::split_cache_options(words, "command line").cache);
}

} // namespace npc::cli
