// neuron_cache: inspect and maintain the persistent cache.

#include <iostream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <npc/bundle/bundle.hpp>
#include <npc/bundle/shared_bundle.hpp>
#include <npc/cache/eviction.hpp>
#include <npc/cache/maintenance.hpp>
#include <npc/cache/store.hpp>
#include <npc/cache/tiers.hpp>
#include <npc/cli/cache_commands.hpp>
#include <npc/cli/cache_options.hpp>
#include <npc/cli/common.hpp>
#include <npc/cli/masquerade_dir.hpp>
#include <npc/cli/programs.hpp>
#include <npc/util/command_line.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/json_text.hpp>
#include <npc/util/output_file.hpp>
#include <npc/util/strings.hpp>
#include <npc/util/table.hpp>
#include <npc/util/trace_events.hpp>

namespace npc::cli {

namespace {

// Connections to a shared cache: verify downloads and prune deletes this many
// entries at once.
constexpr std::size_t kSharedConnections = 8;

using nlohmann::json;
using cache::EntryInfo;
using cache::EntryState;

json entry_json(const EntryInfo& e, const cache::Cache& cache) {
  return {{"key", e.key.str()},
          {"state", cache::to_string(e.state)},
          {"bytes", e.bytes},
          {"last_used", util::format_utc(e.last_used)},
          {"last_used_unix", util::to_unix_seconds(e.last_used)},
          {"compiler_version", e.key.compiler_version},
          {"path", cache.describe(e)}};
}

int cmd_ls(const cache::Cache& cache, bool as_json) {
  auto entries = cache.list();
  std::sort(entries.begin(), entries.end(),
            [](const EntryInfo& a, const EntryInfo& b) { return a.key < b.key; });
  if (as_json) {
    json list = json::array();
    for (const auto& e : entries) list.push_back(entry_json(e, cache));
    print_json({{"cache_root", cache.describe()}, {"entries", list}});
    return 0;
  }
  util::Table table({"KEY", "STATE", "SIZE", "LAST USED", "COMPILER"});
  for (const auto& e : entries)
    table.add({e.key.module_name(), std::string(cache::to_string(e.state)),
               util::format_bytes(e.bytes), util::format_utc(e.last_used),
               e.key.compiler_version});
  table.print(std::cout);
  return 0;
}


int cmd_prune(const cache::Cache& cache, const config::CacheSettings& settings, bool dry_run,
              bool as_json) {
  cache::EvictionPolicy policy{settings.size_limit(), settings.ttl()};
  auto report = cache::evict(cache, policy, dry_run ? cache::DryRun::yes : cache::DryRun::no);
  if (!report.ran) {
    spdlog::warn("another process is evicting from {} now; nothing done", cache.describe());
    if (as_json) print_json({{"ran", false}});
    return 0;
  }
  if (as_json) {
    json deleted = json::array();
    for (const auto& e : report.deleted) deleted.push_back(entry_json(e, cache));
    print_json({{"ran", true},
                {"dry_run", dry_run},
                {"limit_bytes", policy.max_bytes},
                {"ttl_days", settings.cache_ttl_days.value_or(config::kDefaultCacheTtlDays)},
                {"bytes_before", report.bytes_before},
                {"bytes_after", report.bytes_after},
                {"deleted", deleted},
                {"kept_by_ttl", report.kept_by_ttl},
                {"kept_locked", report.kept_locked},
                {"kept_pending", report.kept_pending},
                {"stale_temps_removed", report.stale_temps_removed}});
    return 0;
  }
  util::Table table({dry_run ? "WOULD DELETE" : "DELETED", "SIZE", "LAST USED"});
  for (const auto& e : report.deleted)
    table.add({e.key.str(), util::format_bytes(e.bytes), util::format_utc(e.last_used)});
  if (!table.empty()) table.print(std::cout);
  std::cout << (dry_run ? "would free " : "freed ")
            << util::format_bytes(report.bytes_before - report.bytes_after) << " in "
            << report.deleted.size() << " entries; cache " << util::format_bytes(report.bytes_after)
            << " of a " << util::format_bytes(policy.max_bytes) << " limit";
  if (report.kept_by_ttl > 0) std::cout << "; " << report.kept_by_ttl << " kept (used within the TTL)";
  if (report.kept_locked > 0) std::cout << "; " << report.kept_locked << " kept (being compiled)";
  if (report.kept_pending > 0)
    std::cout << "; " << report.kept_pending << " kept (pending: graphs not compiled yet)";
  std::cout << '\n';
  return 0;
}

json leftover_temps_json(const std::vector<cache::LeftoverTemp>& temps, bool removal_tried) {
  json list = json::array();
  for (const auto& t : temps) {
    json item = {{"path", t.path.string()}, {"removed", removal_tried && t.error.empty()}};
    if (!t.error.empty()) item["error"] = t.error;
    list.push_back(std::move(item));
  }
  return list;
}

int cmd_verify(const cache::Cache& cache, bool repair, bool as_json) {
  auto report = cache::verify_cache(cache, repair ? cache::Repair::yes : cache::Repair::no);
  bool all_repaired = true;
  for (const auto& p : report.problems) all_repaired = all_repaired && p.repaired;
  int status = report.problems.empty() || (repair && all_repaired) ? 0 : 1;
  if (as_json) {
    json bad = json::array();
    for (const auto& p : report.problems)
      bad.push_back({{"key", p.entry.key.str()}, {"problem", p.what}, {"repaired", p.repaired}});
    print_json({{"checked", report.checked},
                {"unverified", report.unverified},
                {"bad", bad},
                {"leftover_temps", leftover_temps_json(report.leftover_temps, report.leftovers_removed)}});
    return status;
  }
  for (const auto& p : report.problems)
    std::cout << "BAD " << p.entry.key.str() << ": " << p.what
              << (p.repaired ? " (demoted to pending)" : "") << '\n';
  for (const auto& t : report.leftover_temps) {
    if (!report.leftovers_removed) std::cout << "LEFTOVER " << t.path.string() << ": left by a writer that died\n";
    else if (t.error.empty()) std::cout << "removed " << t.path.string() << '\n';
    else std::cout << "cannot remove " << t.path.string() << ": " << t.error << '\n';
  }
  std::cout << report.checked << " done entries checked, " << report.problems.size() << " bad, "
            << report.unverified << " without an integrity record";
  if (!report.leftover_temps.empty())
    std::cout << "; " << report.leftover_temps.size() << " leftover temp(s) of dead writers"
              << (report.leftovers_removed ? " removed" : " (--repair removes them)");
  std::cout << '\n';
  return status;
}

int cmd_clear_locks(const cache::Cache& cache, bool force, bool as_json) {
  auto report = cache::clear_locks(cache, force);
  if (as_json) {
    json removed = json::array(), held = json::array();
    for (const auto& p : report.removed) removed.push_back(p.string());
    for (const auto& p : report.held) held.push_back(p.string());
    print_json({{"removed", removed}, {"held", held}, {"leftover_temps", leftover_temps_json(report.temps, true)}});
    return 0;
  }
  for (const auto& p : report.removed) std::cout << "removed " << p.string() << '\n';
  for (const auto& t : report.temps) {
    if (t.error.empty()) std::cout << "removed " << t.path.string() << " (left by a compile that died)\n";
    else std::cout << "cannot remove " << t.path.string() << ": " << t.error << '\n';
  }
  for (const auto& p : report.held) std::cout << "kept " << p.string() << ": its owner is running\n";
  std::cout << report.removed.size() << " lock files removed";
  if (!report.held.empty())
    std::cout << ", " << report.held.size() << " held by running processes kept (--force removes them)";
  if (!report.temps.empty()) std::cout << "; " << report.temps.size() << " leftover temp(s) of dead compiles removed";
  std::cout << '\n';
  return 0;
}

int cmd_clear_failed(const cache::Cache& cache, bool as_json) {
  auto cleared = cache::clear_failed(cache);
  if (as_json) {
    json list = json::array();
    for (const auto& e : cleared) list.push_back(e.key.str());
    print_json({{"cleared", list}});
    return 0;
  }
  for (const auto& e : cleared) std::cout << "cleared " << e.key.str() << '\n';
  std::cout << cleared.size() << " cached failures cleared\n";
  return 0;
}

int cmd_rm(const cache::Cache& cache, const std::vector<std::string>& keys, bool as_json) {
  int status = 0;
  json removed = json::array(), missing = json::array(), locked = json::array();
  for (const auto& name : keys) {
    auto entries = cache::find_entries(cache, name);
    if (entries.empty()) {
      spdlog::error("no cache entry {} in {}", name, cache.describe());
      missing.push_back(name);
      status = 1;
    }
    for (const auto& e : entries) {
      if (!cache::remove_unless_locked(cache, e)) {
        spdlog::error("cache entry {} is being compiled (locked); not removed", e.key.str());
        locked.push_back(e.key.str());
        status = 1;
      } else {
        removed.push_back(e.key.str());
        if (!as_json) std::cout << "removed " << e.key.str() << '\n';
      }
    }
  }
  if (as_json) print_json({{"removed", removed}, {"missing", missing}, {"locked", locked}});
  return status;
}

// --- bundles: export / import (see include/npc/bundle/bundle.hpp) ----------

// The cache the bundles work on: a directory, or a shared tier (its
// connections) through its mirror `cache` (bundle/shared_bundle.hpp).
int cmd_export(cache::Tiers& tiers, const std::string& output, const std::string& report_file,
               bool all, const std::string& used_since, bool include_failed, bool as_json) {
  int chosen = (report_file.empty() ? 0 : 1) + (all ? 1 : 0) + (used_since.empty() ? 0 : 1);
  if (chosen != 1)
    throw UsageError("export needs exactly one of --from-report REPORT.json, --all, --used-since DAYS");
  bundle::ExportSelection selection;
  if (all) selection.kind = bundle::ExportSelection::Kind::all;
  if (!report_file.empty()) {
    selection.kind = bundle::ExportSelection::Kind::from_report;
    selection.report = report_file;
  }
  if (!used_since.empty()) {
    auto days = util::parse_non_negative(used_since);
    if (!days) throw UsageError("--used-since has the bad value '" + used_since + "': expected a number of days");
    selection.kind = bundle::ExportSelection::Kind::used_since;
    selection.used_since_days = *days;
  }
  // Found before entries are read and hashed, and said of the path given.
  if (auto s = util::check_output_writable(output); !s) throw EnvironmentError("--output: " + s.error());
  // A bundle written to our stdout (-o /dev/stdout) is not to be followed by the summary.
  std::ostream& out = util::same_file_as_stdout(output) ? std::cerr : std::cout;
  auto report = bundle::export_cache_bundle(tiers, kSharedConnections, selection, output, {include_failed});
  int status = report.skipped.empty() ? 0 : 1;
  if (as_json) {
    print_json(bundle::to_json(report), out);
    return status;
  }
  for (const auto& s : report.skipped) out << "SKIPPED " << s.key << ": " << s.reason << '\n';
  if (!report.left_out.empty())
    out << report.left_out.size() << " cached failures left out (--include-failed exports them)\n";
  out << "exported " << report.exported.size() << " entries (" << util::format_bytes(report.bytes) << ") to "
      << output << " (" << util::format_bytes(report.bundle_bytes) << ")";
  if (report.unverified > 0) out << "; " << report.unverified << " had no integrity record and were hashed now";
  if (!report.skipped.empty()) out << "; " << report.skipped.size() << " skipped";
  out << '\n';
  return status;
}

int cmd_import(cache::Tiers& tiers, const config::CacheSettings& settings, const std::string& bundle,
               bool include_failed, const std::string& lock_timeout, bool as_json) {
  bundle::ImportOptions options;
  options.include_failed = include_failed;
  if (!lock_timeout.empty()) {
    auto timeout = util::parse_positive_seconds(lock_timeout);
    if (!timeout)
      throw UsageError("--lock-timeout has the bad value '" + lock_timeout + "': " +
                       std::string(util::kPositiveSecondsExpected));
    options.lock_wait = *timeout;
  }
  auto report = bundle::import_cache_bundle(tiers, kSharedConnections, bundle, options);
  // A mirror keeps to its limit as any local cache; the shared tier itself
  // is evicted only by prune (cache/eviction.hpp).
  if (!report.imported.empty()) cache::evict_after_write(tiers.directory(), {settings.size_limit(), settings.ttl()});
  if (as_json) {
    print_json(bundle::to_json(report));
    return report.exit_code();
  }
  for (const auto& r : report.rejected) std::cout << "REJECTED " << r.key << ": " << r.reason << '\n';
  if (!report.error || !report.imported.empty() || !report.rejected.empty())
    std::cout << report.imported.size() << " imported, " << report.skipped.size() << " skipped, "
              << report.rejected.size() << " rejected" << std::endl;
  if (report.error) spdlog::error("{}", *report.error);
  return report.exit_code();
}


} // namespace

namespace {

int cmd_merge_traces(const std::vector<std::string>& inputs, const std::string& output) {
  std::vector<fs::path> paths(inputs.begin(), inputs.end());
  auto merged = util::merge_traces(paths);
  if (!merged)
    throw UsageError("merge-traces: " + merged.error() + " (name the files neuron_parallel_compile --trace wrote)");
  if (auto s = util::write_output_file(output, *merged); !s) throw EnvironmentError("merge-traces: " + s.error());
  std::cout << "merged " << inputs.size() << " trace(s) into " << output << "\n";
  return 0;
}

} // namespace

int neuron_cache_main(int argc, char** argv) {
  return run_program("neuron_cache", [&]() -> int {
    CLI::App app{"Inspect and maintain the Neuron persistent compile cache.", "neuron_cache"};
    app.set_version_flag("--version", std::string("neuron_cache ") + NPC_VERSION);
    app.require_subcommand(1);
    app.fallthrough();
    config::CacheSettings overrides;
    std::string size_text, ttl_text;
    bool as_json = false;
    add_cache_options(app, overrides, size_text, ttl_text);
    app.add_flag("--json", as_json, "Machine-readable output");

    auto* ls = app.add_subcommand("ls", "One row per entry: key, state, size, last use, compiler");
    auto* stats = app.add_subcommand(
        "stats", "Entries per state, total size, limit, oldest and newest use; hits, misses and compile time saved "
                 "per program");
    bool zero_stats = false;
    stats->add_flag("--zero", zero_stats, "Reset the hit, miss and time counters");
    auto* prune = app.add_subcommand("prune", "Evict now: least recently used first, above the size limit");
    std::string max_size, prune_ttl;
    bool dry_run = false;
    prune->add_option("--max-size", max_size, "Size limit for this pass")->type_name("BYTES");
    prune->add_option("--ttl", prune_ttl, "Keep entries used within DAYS")->type_name("DAYS");
    prune->add_flag("--dry-run", dry_run, "List what would be deleted, delete nothing");
    auto* verify = app.add_subcommand("verify", "Check every done entry's NEFF against its integrity record");
    bool repair = false;
    verify->add_flag("--repair", repair, "Demote bad entries to pending so they compile again");
    auto* clear_locks = app.add_subcommand("clear-locks", "Remove lock files left by processes that died");
    bool force = false;
    clear_locks->add_flag("--force", force, "Remove every lock file, even held ones");
    auto* clear_failed = app.add_subcommand("clear-failed", "Forget cached failures so those graphs compile again");
    auto* rm = app.add_subcommand("rm", "Remove entries");
    std::vector<std::string> keys;
    rm->add_option("KEY", keys, "neuronxcc-<version>/MODULE_<hash>+<hash>")->required();
    auto* explain = app.add_subcommand(
        "explain", "Which entries hold the same graph bytes, and what differs from the current flags and compiler");
    std::string explain_target;
    std::optional<std::string> explain_compiler;
    explain->add_option("TARGET", explain_target,
                        "A graph file, an entry directory, neuronxcc-<version>/MODULE_<hash>+<hash>, or "
                        "MODULE_<hash>+<hash> (as ls prints it)")
        ->required();
    explain->add_option("--compiler", explain_compiler, "The compiler (default: $NEURON_CC, else neuronx-cc on PATH)")
        ->type_name("PATH");
    std::vector<std::string> explain_command_line;
    explain->add_option("COMMAND", explain_command_line,
                        "After --: a neuronx-cc command line as a frontend runs it (neuronx-cc compile GRAPH "
                        "FLAGS... --output FILE), to compare with the entries the masquerade made");
    auto* misses = app.add_subcommand(
        "misses", "The graphs compiled after the last pre-compile (whoever compiled them), each with why the "
                  "pre-compile did not cover it");
    std::string misses_since;
    misses->add_option("--since", misses_since, "After this time instead (UTC: 2026-11-29T10:00:00Z, or a day)")
        ->type_name("TIME");
    // bundles
    auto* export_cmd = app.add_subcommand("export", "Write chosen done entries to one bundle (tar + zstd) with a manifest");
    std::string export_output, export_report, export_used_since, import_lock_timeout;
    bool export_all = false, include_failed = false;
    export_cmd->add_option("-o,--output", export_output, "The bundle to write")->type_name("FILE")->required();
    export_cmd->add_option("--from-report", export_report, "Exactly the graphs of one neuron_parallel_compile --report")
        ->type_name("REPORT.json");
    export_cmd->add_flag("--all", export_all, "Every done entry of every compiler version");
    export_cmd->add_option("--used-since", export_used_since, "Done entries used within DAYS")->type_name("DAYS");
    export_cmd->add_flag("--include-failed", include_failed, "Also cached failures (model.log, no NEFF)");
    auto* import_cmd = app.add_subcommand("import", "Verify a bundle and add its entries to the cache");
    std::string import_file;
    import_cmd->add_option("FILE", import_file, "The bundle")->required();
    import_cmd->add_flag("--include-failed", include_failed, "Also import cached failures");
    import_cmd->add_option("--lock-timeout", import_lock_timeout,
                           "Wait at most SECONDS for a compile of the same entry here (default 60)")
        ->type_name("SECONDS");

    auto* masquerade_cmd = app.add_subcommand(
        "masquerade-dir", "Print the directory to put first on PATH so that every frontend's neuronx-cc goes "
                          "through the cache (neuron_cc_wrapper as neuronx-cc)");
    std::optional<std::string> masquerade_create;
    masquerade_cmd->add_option("--create", masquerade_create,
                               "Make DIR hold a neuronx-cc link to this installation's neuron_cc_wrapper first")
        ->type_name("DIR");

    auto* merge_traces_cmd = app.add_subcommand(
        "merge-traces", "Join the timelines of several launchers (a cluster's hosts) into one trace, each as a "
                        "process of its own");
    std::string merged_trace;
    std::vector<std::string> traces;
    merge_traces_cmd->add_option("-o,--output", merged_trace, "The trace to write")->type_name("FILE")->required();
    merge_traces_cmd->add_option("FILE", traces, "A trace written by neuron_parallel_compile's trace option")->required();

    util::parse_command_line(app, argc, argv);
    // Nothing of the cache: no settings read, no S3 opened.
    if (*merge_traces_cmd) return cmd_merge_traces(traces, merged_trace);
    if (*masquerade_cmd)
      return cmd_masquerade_dir(masquerade_create ? std::optional<fs::path>(*masquerade_create) : std::nullopt);
    finish_cache_options(overrides, size_text, ttl_text);
    if (!max_size.empty()) {
      auto bytes = util::parse_bytes(max_size);
      if (!bytes)
        throw UsageError("prune: --max-size has the bad value '" + max_size +
                         "': expected a size in bytes such as 100000000000 or 100GB");
      overrides.cache_size = *bytes;
    }
    if (!prune_ttl.empty()) {
      auto days = util::parse_non_negative(prune_ttl);
      if (!days)
        throw UsageError("prune: --ttl has the bad value '" + prune_ttl +
                         "': expected a non-negative number of days such as 30");
      overrides.cache_ttl_days = *days;
    }
    Settings settings = load_settings(overrides);
    cache::set_lock_tool_name("neuron_cache");
    cache::Tiers tiers(settings);
    const cache::Cache& cache = tiers.directory();
    // On a shared cache the commands work on its objects, every node's shared
    // copy, not on this node's mirror (the bundles pass through the mirror).
    const cache::Cache& target = tiers.common(kSharedConnections);
    // A cache that is not there looks empty: say so, or an `entries 0`
    // would pass for a look at the cache the user meant. (rm and export name
    // the cache in their own errors.)
    std::error_code missing;
    const bool looks_at_all = *ls || *stats || *prune || *verify || *clear_locks || *clear_failed || *misses;
    if (!tiers.shared() && looks_at_all && !fs::exists(cache.root(), missing))
      spdlog::warn("the cache {} does not exist: nothing in it (name the cache with --cache_dir in NEURON_CC_FLAGS, "
                   "NEURON_COMPILE_CACHE_URL or --cache_dir)",
                   cache.root().string());

    if (*ls) return cmd_ls(target, as_json);
    // The counters are this host's: in the cache directory, or an S3 cache's
    // local mirror.
    if (*stats && zero_stats) return cmd_zero_stats(cache.private_dir(), as_json);
    if (*stats) return cmd_stats(target, settings.cache, cache.private_dir(), as_json);
    if (*prune) return cmd_prune(target, settings.cache, dry_run, as_json);
    if (*verify) return cmd_verify(target, repair, as_json);
    if (*clear_locks) return cmd_clear_locks(target, force, as_json);
    if (*clear_failed) return cmd_clear_failed(target, as_json);
    if (*rm) return cmd_rm(target, keys, as_json);
    if (*explain)
      return cmd_explain(tiers, kSharedConnections, settings, explain_target, explain_compiler, explain_command_line, as_json);
    if (*misses) return cmd_misses(tiers, kSharedConnections, misses_since, as_json);
    if (*export_cmd)
      return cmd_export(tiers, export_output, export_report, export_all, export_used_since, include_failed, as_json);
    if (*import_cmd)
      return cmd_import(tiers, settings.cache, import_file, include_failed, import_lock_timeout, as_json);
    return 2;
  });
}

} // namespace npc::cli
