// neuron_cache stats and zero-stats: what the cache holds, and what the
// programs that used it counted (cache/usage_stats.hpp).

#include <npc/cli/cache_commands.hpp>

#include <algorithm>
#include <iostream>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <npc/cache/usage_stats.hpp>
#include <npc/config/settings.hpp>
#include <npc/util/strings.hpp>
#include <npc/util/shell_words.hpp>
#include <npc/util/table.hpp>
#include <npc/util/utf8.hpp>

namespace npc::cli {

namespace {

using nlohmann::json;

json usage_json(const cache::UsageCounts& c) {
  return {{"hits", c.hits},     {"hits_without_time", c.hits_without_time}, {"misses", c.misses},
          {"failed", c.failed}, {"compile_seconds", c.compile_seconds},     {"saved_seconds", c.saved_seconds}};
}

std::string hit_rate(const cache::UsageCounts& c) {
  if (c.hits + c.misses == 0) return "-";
  return fmt::format("{:.0f}%", 100.0 * static_cast<double>(c.hits) / static_cast<double>(c.hits + c.misses));
}

// The counters of the programs that used the cache, a row each and a total.
void print_usage(const cache::UsageStats& usage, const fs::path& counters_dir) {
  util::Table table({"PROGRAM", "HITS", "MISSES", "FAILED", "HIT RATE", "COMPILING", "SAVED"});
  auto row = [&](const std::string& name, const cache::UsageCounts& c) {
    std::string saved = util::format_seconds(c.saved_seconds);
    if (c.hits_without_time > 0) saved += " (+" + std::to_string(c.hits_without_time) + " hits untimed)";
    table.add({name, std::to_string(c.hits), std::to_string(c.misses), std::to_string(c.failed), hit_rate(c),
               util::format_seconds(c.compile_seconds), saved});
  };
  // A program's name is a shard's text: shown, never sent to the terminal raw.
  for (const auto& [name, counts] : usage.by_program) row(util::printable_text(name), counts);
  row("total", usage.total());
  std::cout << "\n";
  table.print(std::cout);
  std::cout << "counted in " << counters_dir.string() << " since "
            << (usage.zeroed_at ? util::format_utc(*usage.zeroed_at) : std::string("it was made"))
            << " (neuron_cache stats --zero resets)\n";
}

std::string_view fault_name(cache::ShardFault fault) {
  switch (fault) {
  case cache::ShardFault::torn: return "torn";
  case cache::ShardFault::not_a_file: return "not_a_file";
  case cache::ShardFault::inaccessible: return "inaccessible";
  case cache::ShardFault::busy: return "busy";
  case cache::ShardFault::no_folder: return "no_folder";
  }
  return "inaccessible";
}

// What the user can do about a shard `stats` could not count (`many`: about
// several such shards).
std::string what_to_do(const cache::UnreadShard& shard, bool many) {
  const std::string it = many ? "them" : "it";
  switch (shard.fault) {
  case cache::ShardFault::torn: return "the next count in " + it + " rewrites " + it;
  case cache::ShardFault::not_a_file:
  case cache::ShardFault::no_folder:
    return "remove " + it + ", or run neuron_cache stats --zero, which also empties the other counters";
  case cache::ShardFault::inaccessible: return "give this user read access to " + it;
  case cache::ShardFault::busy: return "look again once the process holding " + it + " has gone on or ended";
  }
  return "";
}

// What the user can do about a shard `stats --zero` could not zero.
std::string what_to_do_after_zero(const cache::UnreadShard& shard, bool many) {
  const std::string it = many ? "them" : "it";
  switch (shard.fault) {
  case cache::ShardFault::not_a_file:
  case cache::ShardFault::no_folder: {
    std::error_code ec;
    const bool folder = fs::is_directory(fs::symlink_status(shard.path, ec));
    return "remove it yourself (" + std::string(folder ? "rm -r " : "rm ") +
           util::quote_shell_word(shard.path.string()) + ") and run again";
  }
  case cache::ShardFault::busy: return "run again once the process holding " + it + " has gone on or ended";
  case cache::ShardFault::torn:
  case cache::ShardFault::inaccessible:
    return "give this user write access to " + it + " (and to the folder it is in) and run again";
  }
  return "";
}

json unread_json(const std::vector<cache::UnreadShard>& shards) {
  json list = json::array();
  for (const auto& s : shards)
    list.push_back({{"path", s.path.string()}, {"fault", fault_name(s.fault)}, {"detail", s.detail}});
  return list;
}

// "A is a FIFO, not a file; B is a directory, not a file (remove them, ...); C is torn (...) (...)": each
// shard described, those with the same remedy together, the remedy said once after them.
std::string joined_descriptions(const std::vector<cache::UnreadShard>& shards,
                                std::string (*remedy)(const cache::UnreadShard&, bool many)) {
  std::vector<std::pair<std::string, std::vector<const cache::UnreadShard*>>> groups;
  for (const auto& s : shards) {
    const std::string key = remedy(s, false);
    auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
    if (group == groups.end()) group = groups.insert(groups.end(), {key, {}});
    group->second.push_back(&s);
  }
  std::string text;
  for (const auto& [key, members] : groups) {
    for (const auto* s : members) text += (text.empty() ? "" : "; ") + cache::describe(*s);
    text += " (" + remedy(*members.front(), members.size() > 1) + ")";
  }
  return text;
}

void warn_unread(const cache::UsageStats& usage) {
  if (usage.unread.empty()) return;
  spdlog::warn("the counters of {} are not in the sums: {}",
               usage.unread.size() == 1 ? std::string("1 file") : std::to_string(usage.unread.size()) + " files",
               joined_descriptions(usage.unread, what_to_do));
}

} // namespace

// Repairs what it can: a shard (or the folder) that is not a file is
// removed and made again, empty. What it cannot zero is an error naming each
// one and why, after the others were zeroed.
int cmd_zero_stats(const fs::path& counters_dir, bool as_json) {
  auto report = cache::zero_usage(counters_dir, std::chrono::system_clock::now());
  // What was replaced is said even when the rest fails: it is done.
  if (!as_json)
    for (const auto& r : report.replaced) std::cout << "replaced " << cache::describe(r) << '\n';
  if (!report.left.empty())
    throw EnvironmentError("stats --zero: " + std::to_string(report.left.size()) + " of the counters' files in " +
                           (counters_dir / cache::kStatsDir).string() + " not zeroed: " +
                           joined_descriptions(report.left, what_to_do_after_zero));
  if (as_json) print_json({{"zeroed", counters_dir.string()}, {"replaced", unread_json(report.replaced)}});
  else std::cout << "usage counters of " << counters_dir.string() << " zeroed\n";
  return 0;
}

int cmd_stats(const cache::Cache& cache, const config::CacheSettings& settings, const fs::path& counters_dir,
              bool as_json) {
  // Counters that cannot be read take nothing from the rest: the entries,
  // and every shard that can be read, are shown, and a warning names the
  // others (exit 0: what is shown is right, only incomplete).
  const cache::UsageStats usage = cache::read_usage(counters_dir);
  cache::CacheCensus census = cache.census();
  std::map<std::string, std::size_t> by_state;
  for (auto state : {cache::EntryState::pending, cache::EntryState::locked, cache::EntryState::done,
                     cache::EntryState::failed, cache::EntryState::incomplete})
    by_state[std::string(cache::to_string(state))] = census.in_state(state);
  std::uint64_t total = census.bytes;
  const auto& oldest = census.oldest_use;
  const auto& newest = census.newest_use;
  double ttl_days = settings.cache_ttl_days.value_or(config::kDefaultCacheTtlDays);
  if (as_json) {
    json doc = {{"cache_root", cache.describe()},
                {"entries", census.entries},
                {"states", by_state},
                {"bytes", total},
                {"limit_bytes", settings.size_limit()},
                {"ttl_days", ttl_days},
                {"oldest_use", oldest ? json(util::format_utc(*oldest)) : json(nullptr)},
                {"newest_use", newest ? json(util::format_utc(*newest)) : json(nullptr)}};
    json programs = json::object();
    for (const auto& [name, counts] : usage.by_program) programs[name] = usage_json(counts);
    doc["usage"] = {{"counters", counters_dir.string()},
                    {"programs", programs},
                    {"total", usage_json(usage.total())},
                    {"zeroed_at", usage.zeroed_at ? json(util::format_utc(*usage.zeroed_at)) : json(nullptr)},
                    {"unread", unread_json(usage.unread)}};
    print_json(doc);
    warn_unread(usage);
    return 0;
  }
  util::Table table({"FIELD", "VALUE"});
  table.add({"cache root", cache.describe()});
  table.add({"entries", std::to_string(census.entries)});
  for (const auto& [state, count] : by_state) table.add({"  " + state, std::to_string(count)});
  table.add({"total size", util::format_bytes(total) + " (" + std::to_string(total) + " bytes)"});
  table.add({"size limit", util::format_bytes(settings.size_limit()) + " (" +
                               std::to_string(settings.size_limit()) + " bytes)"});
  table.add({"ttl", fmt::format("{} days", ttl_days)});
  table.add({"oldest use", oldest ? util::format_utc(*oldest) : "-"});
  table.add({"newest use", newest ? util::format_utc(*newest) : "-"});
  table.print(std::cout);
  print_usage(usage, counters_dir);
  warn_unread(usage);
  return 0;
}

} // namespace npc::cli
