#include <npc/cli/cache_options.hpp>

#include <vector>

namespace npc::cli {

namespace fs = std::filesystem;

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
