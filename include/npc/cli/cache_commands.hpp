#pragma once
// The subcommands of neuron_cache that live in files of their own
// (cli/cache_*_command.cpp); the program's command line and the others are
// in cli/neuron_cache.cpp. Each prints to stdout and returns the exit
// status; bad input throws UsageError, a cache it cannot use
// EnvironmentError (util/error.hpp).

#include <cstddef>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <npc/cache/store.hpp>
#include <npc/cache/tiers.hpp>
#include <npc/cli/common.hpp>
#include <npc/config/settings.hpp>
#include <npc/util/json_text.hpp>

namespace npc::cli {

namespace fs = std::filesystem;

// What --json prints: one document, indented.
inline void print_json(const nlohmann::json& doc, std::ostream& out = std::cout) {
  out << util::to_json_text(doc, 2) << '\n';
}

// stats: the entries by state, their size against the limit, and the
// programs' counters kept in `counters_dir`.
int cmd_stats(const cache::Cache& cache, const config::CacheSettings& settings, const fs::path& counters_dir,
              bool as_json);
// zero-stats: the counters start again from zero.
int cmd_zero_stats(const fs::path& counters_dir, bool as_json);

// explain TARGET [-- neuronx-cc command line]: of the tiers' common cache
// (a shared cache's objects over `connections`, or the directory).
int cmd_explain(cache::Tiers& tiers, std::size_t connections, const Settings& settings,
                const std::string& target, const std::optional<std::string>& compiler,
                const std::vector<std::string>& command_line, bool as_json);

// misses [--since TIME]: the graphs compiled after the last pre-compile
// recorded in the tiers' common cache (or after TIME), by cause.
int cmd_misses(cache::Tiers& tiers, std::size_t connections, const std::string& since, bool as_json);

} // namespace npc::cli
