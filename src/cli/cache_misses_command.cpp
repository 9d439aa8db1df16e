// neuron_cache misses: the graphs compiled after the last pre-compile, by
// cause (cache/misses.hpp).

#include <algorithm>
#include <iostream>
#include <map>
#include <set>

#include <npc/cache/key.hpp>
#include <npc/cache/misses.hpp>
#include <npc/cache/nearest_graph.hpp>
#include <npc/cache/precompile_record.hpp>
#include <npc/cli/cache_commands.hpp>
#include <npc/util/error.hpp>
#include <npc/util/strings.hpp>

namespace npc::cli {

namespace {

// "2026-11-29T10:00:00.125Z to 2026-11-29T10:05:12.500Z on trn1-a, trn1-b: 24 graph(s)"
std::string describe_precompile(const std::vector<cache::PrecompileRecord>& run) {
  util::WallTime started = run.front().started, ended = run.front().ended;
  std::string hosts;
  std::set<std::string> keys;
  for (const auto& r : run) {
    started = std::min(started, r.started);
    ended = std::max(ended, r.ended);
    if (hosts.find(r.host) == std::string::npos) hosts += (hosts.empty() ? "" : ", ") + r.host;
    for (const auto& g : r.graphs) keys.insert(g.key);
  }
  return util::format_utc_ms(started) + " to " + util::format_utc_ms(ended) + " on " + hosts + ": " +
         std::to_string(keys.size()) + " graph(s)";
}

// The listing's window as its header says it: from the pre-compile's end,
// or from --since (the pre-compile, when recorded, still what it is judged
// against).
std::string window_of(const cache::Misses& found) {
  const std::string since = "since " + util::format_utc_ms(found.since);
  if (found.precompile.empty()) return since;
  const std::string run = "the pre-compile of " + describe_precompile(found.precompile);
  if (found.since == cache::precompile_end(found.precompile)) return "after " + run;
  return since + ", judged against " + run;
}

std::string detail_of(const cache::Miss& miss) {
  switch (miss.cause) {
  case cache::MissCause::other_flags: {
    std::string text = "the trial's " + miss.trial_key->module_name();
    if (!miss.flags_added.empty()) text += "; flags here, not in the trial: " + cache::joined_flags(miss.flags_added);
    if (!miss.flags_removed.empty())
      text += "; flags in the trial, not here: " + cache::joined_flags(miss.flags_removed);
    if (miss.flags_added.empty() && miss.flags_removed.empty()) text += "; the same flags in another order";
    return text;
  }
  case cache::MissCause::not_in_trial:
    return cache::describe_nearest(miss.trial_key, {miss.differences, miss.hint}, miss.undecodable);
  case cache::MissCause::other_compiler_version:
    return "compiler " + miss.key.compiler_version + " here, " + miss.trial_key->compiler_version +
           " in the pre-compile";
  default: return "";
  }
}

nlohmann::json to_json(const cache::Misses& found) {
  nlohmann::json precompile = nullptr;
  if (!found.precompile.empty()) {
    precompile = nlohmann::json::array();
    for (const auto& r : found.precompile)
      precompile.push_back({{"record", r.name},
                            {"started", util::format_utc_ms(r.started)},
                            {"ended", util::format_utc_ms(r.ended)},
                            {"host", r.host},
                            {"compiler_version", r.compiler_version},
                            {"graphs", r.graphs.size()}});
  }
  nlohmann::json misses = nlohmann::json::array();
  std::map<std::string, std::size_t> by_cause;
  for (const auto& m : found.misses) {
    nlohmann::json one = {{"key", m.key.str()},
                          {"cause", cache::to_string(m.cause)},
                          {"state", cache::to_string(m.state)},
                          {"written", util::format_utc_ms(m.written)}};
    if (m.trial_key) one["trial_key"] = m.trial_key->str();
    if (m.cause == cache::MissCause::not_in_trial) {
      if (!m.undecodable.empty()) one["undecodable"] = m.undecodable;
      else if (m.trial_key) {
        one["differences"] = m.differences;
        one["hint"] = m.hint;
      }
    }
    if (m.cause == cache::MissCause::other_flags) {
      one["flags_added"] = m.flags_added;
      one["flags_removed"] = m.flags_removed;
    }
    misses.push_back(std::move(one));
    ++by_cause[std::string(cache::to_string(m.cause))];
  }
  return {{"precompile", std::move(precompile)},
          {"since", util::format_utc_ms(found.since)},
          {"entries", found.looked_at},
          {"misses", std::move(misses)},
          {"by_cause", by_cause}};
}

void print_text(const cache::Misses& found) {
  const std::string after = window_of(found);
  if (found.misses.empty()) {
    std::cout << "no graph compiled " << after << '\n';
    return;
  }
  std::cout << found.misses.size() << " graph(s) compiled " << after << '\n';
  std::size_t i = 0;
  while (i < found.misses.size()) {
    const cache::MissCause cause = found.misses[i].cause;
    std::size_t end = i;
    while (end < found.misses.size() && found.misses[end].cause == cause) ++end;
    std::cout << cache::describe(cause) << " (" << end - i << "):\n";
    for (; i < end; ++i) {
      const cache::Miss& m = found.misses[i];
      std::cout << "  " << m.key.str() << "  " << cache::to_string(m.state) << "  " << util::format_utc_ms(m.written);
      if (auto detail = detail_of(m); !detail.empty()) std::cout << "  " << detail;
      std::cout << '\n';
    }
  }
}

} // namespace

int cmd_misses(cache::Tiers& tiers, std::size_t connections, const std::string& since_text, bool as_json) {
  std::optional<util::WallTime> since;
  if (!since_text.empty()) {
    since = util::parse_utc(since_text);
    if (!since)
      throw UsageError("misses: --since has the bad value '" + since_text +
                       "': expected a UTC time such as 2026-11-29T10:00:00Z or a day such as 2026-11-29");
  }
  const cache::Cache& cache = tiers.common(connections);
  auto records = cache::read_precompile_records(*cache.storage());
  if (!records)
    throw EnvironmentError("misses: cannot read the pre-compile records of " + cache.describe() + ": " +
                           records.error() + " (move that aside: the next neuron_parallel_compile run records again)");
  auto last = cache::last_precompile(std::move(*records));
  if (!since) {
    if (last.empty())
      throw Error("misses: no pre-compile is recorded in " + cache.describe() +
                  " (neuron_parallel_compile records each run that compiles); give --since TIME to list what "
                  "was compiled since then");
    since = cache::precompile_end(last); // where a listing starts unless told
  }
  auto found_or = cache::find_misses(cache, std::move(last), *since);
  if (!found_or) throw EnvironmentError("misses: " + found_or.error());
  const cache::Misses& found = *found_or;
  if (as_json) print_json(to_json(found));
  else print_text(found);
  return 0;
}

} // namespace npc::cli
