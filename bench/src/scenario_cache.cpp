// Scenario 5: the cache at scale. The same operations on caches of 100,
// 20,000 and 100,000 entries: neuron_cache stats, ls --json, an eviction pass
// that really deletes a share of the entries, and a cache hit through the
// compile entry; side by side, what a user would run from the shell instead:
// `find | wc -l` for a count, and find | sort | head | rm for LRU eviction.
// Run twice: in the scratch directory (a tmpfs where there is one, so the
// figures say what the code costs), and on a disk file system, where caches
// live (there each deletion also costs the disk's journal and discards).

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <fcntl.h>
#include <thread>
#include <unistd.h>

#include <npc/cache/summary.hpp>

#include "fixtures.hpp"
#include "scenarios.hpp"

namespace bench {


namespace {

struct Size {
  std::size_t entries = 0;
  fs::path cache;
  std::vector<fs::path> entry_dirs; // bulk entries, by index
  std::uint64_t bulk_bytes = 0;
  double populate_seconds = 0;
};

BulkSpec bulk(std::size_t first, std::size_t count) {
  BulkSpec spec;
  spec.tag = "scale";
  spec.first = first;
  spec.count = count;
  return spec;
}

// Writes back the bulk entries an eviction pass deleted. In a big cache
// it then waits until they are settled (a listing records an entry, and an
// eviction pass trusts its earlier look at one, only when its directory is
// older than the settle time), as the entries an eviction pass meets in
// practice, unused for weeks, are. Not timed.
//
// The entries are then written to the disk (syncfs), as old entries are:
// on a disk file system, deleting files whose data never left the page
// cache costs a fraction of deleting files on the disk, and whichever of
// two contenders ran just after a restore would delete those.
std::size_t restore(Size& size) {
  std::size_t restored = 0;
  for (std::size_t i = 0; i < size.entry_dirs.size(); ++i) {
    if (fs::exists(size.entry_dirs[i])) continue;
    std::ignore = write_bulk_entries(size.cache, bulk(i, 1));
    ++restored;
  }
  if (restored == 0) return restored;
  if (int fd = ::open(size.cache.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); fd >= 0) {
    ::syncfs(fd);
    ::close(fd);
  }
  if (size.entries >= 1000)
    std::this_thread::sleep_for(npc::cache::kSummarySettleTime + std::chrono::seconds(1));
  return restored;
}

bool in_memory(const std::string& filesystem) { return filesystem == "tmpfs" || filesystem == "ramfs"; }

// A writable folder on a disk file system: $NPC_BENCH_DISK_SCRATCH, else
// the first of $TMPDIR, /var/tmp and /tmp that is not in memory.
fs::path disk_scratch_parent() {
  if (const char* given = std::getenv("NPC_BENCH_DISK_SCRATCH"); given && *given) return given;
  std::vector<fs::path> candidates;
  if (const char* tmp = std::getenv("TMPDIR"); tmp && *tmp) candidates.emplace_back(tmp);
  candidates.emplace_back("/var/tmp");
  candidates.emplace_back("/tmp");
  for (const auto& c : candidates) {
    std::error_code ec;
    if (fs::is_directory(c, ec) && ::access(c.c_str(), W_OK) == 0 && !in_memory(mount_of(c).type)) return c;
  }
  throw std::runtime_error("no disk file system to run on: $TMPDIR, /var/tmp and /tmp are all in memory "
                           "(set NPC_BENCH_DISK_SCRATCH to a folder on a disk)");
}

Scenario run_cache_scale_in(const Context& context, Scenario s, const fs::path& dir) {
  make_dirs(dir);
  const Mount mount = mount_of(dir);
  const std::size_t big = context.options.quick ? 10000 : 100000;
  const double keep_share = 0.9; // the eviction pass deletes the oldest ~10%
  const int hits = context.options.quick ? 5 : 20;

  std::vector<Size> sizes(3);
  sizes[0].entries = 100;
  sizes[1].entries = context.options.quick ? 2000 : 20000;
  sizes[2].entries = big;
  fs::path hit_graph = dir / "hit.hlo";
  write_text(hit_graph, "HloModule scale_hit\n// standin-cost-ms: 1\n\nENTRY %main (p0: f32[8]) -> f32[8] {\n"
                        "  ROOT %p0 = f32[8]{0} parameter(0)\n}\n");
  for (auto& size : sizes) {
    size.cache = dir / ("cache-" + std::to_string(size.entries));
    double start = now_seconds();
    size.bulk_bytes = write_bulk_entries(size.cache, bulk(0, size.entries));
    size.populate_seconds = now_seconds() - start;
    for (std::size_t i = 0; i < size.entries; ++i) size.entry_dirs.push_back(bulk_entry_dir(size.cache, bulk(0, 0), i));
    // The entry the hits are served from: compiled for real, used just now.
    Environment env = clean_environment(context.programs, size.cache);
    std::ignore = run_checked({{context.programs.wrapper.string(), "compile", "--graph", hit_graph.string(), "--output",
                                (dir / "hit.neff").string()},
                               env, dir / "hit.log", std::nullopt},
                              "compiling the hit entry");
    log(context, s.id + ": wrote " + count_text(size.entries) + " entries in " +
                     num(size.populate_seconds, 1) + " s");
  }

  auto tool = [&](const Size& size, std::vector<std::string> words) {
    std::vector<std::string> argv = {context.programs.cache_tool.string(), "--cache_dir", size.cache.string()};
    argv.insert(argv.end(), words.begin(), words.end());
    return argv;
  };
  // How many entries our pass deletes (a dry run, not timed): the shell
  // pipeline deletes as many, the oldest by directory mtime.
  auto prune_limit = [&](const Size& size) {
    return static_cast<std::uint64_t>(static_cast<double>(size.bulk_bytes) * keep_share);
  };
  std::vector<std::size_t> to_delete(sizes.size());
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    fs::path out = dir / "dry-run.json";
    wipe(out);
    std::ignore = run_checked({tool(sizes[k], {"--json", "prune", "--dry-run", "--max-size",
                                               std::to_string(prune_limit(sizes[k]))}),
                               clean_environment(context.programs, sizes[k].cache), out, std::nullopt},
                              "neuron_cache prune --dry-run");
    json doc = json::parse(read_text(out), nullptr, false);
    to_delete[k] = doc.is_discarded() ? 0 : doc.value("deleted", json::array()).size();
  }
  auto shell = [](const std::string& script) { return std::vector<std::string>{"/bin/sh", "-c", script}; };
  auto quoted = [](const fs::path& path) { return "'" + path.string() + "'"; };

  std::vector<Contender> contenders;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    Environment env = clean_environment(context.programs, sizes[k].cache);
    fs::path root = cache_root(sizes[k].cache);
    contenders.push_back({"stats", nullptr, [&, env, k](int) {
                            Size& size = sizes[k];
                            Timed t = run_checked({tool(size, {"stats"}), env, dir / "stats.log", std::nullopt},
                                                  "neuron_cache stats");
                            return json{{"seconds", t.seconds}, {"peak_rss_bytes", t.status.peak_rss_bytes}};
                          }});
    contenders.push_back({"stats-cold",
                          [root](int) { wipe(root / ".npc" / "summary"); }, // not timed
                          [&, env, k](int) {
                            Size& size = sizes[k];
                            Timed t = run_checked({tool(size, {"stats"}), env, dir / "stats.log", std::nullopt},
                                                  "neuron_cache stats, no summary");
                            return json{{"seconds", t.seconds}, {"peak_rss_bytes", t.status.peak_rss_bytes}};
                          }});
    contenders.push_back({"find-count", nullptr, [&, env, root](int) {
                            Timed t = run_checked({shell("find " + quoted(root) + " -name model.done | wc -l"), env,
                                                   dir / "find.log", std::nullopt},
                                                  "find | wc -l");
                            return json{{"seconds", t.seconds}};
                          }});
    contenders.push_back({"ls", nullptr, [&, env, k](int) {
                            Size& size = sizes[k];
                            Timed t = run_checked({tool(size, {"ls", "--json"}), env, "/dev/null", std::nullopt},
                                                  "neuron_cache ls --json");
                            return json{{"seconds", t.seconds}, {"peak_rss_bytes", t.status.peak_rss_bytes}};
                          }});
    contenders.push_back({"prune", nullptr, [&, env, k](int) {
                            Size& size = sizes[k];
                            auto limit = prune_limit(size);
                            fs::path out = dir / "prune.json";
                            wipe(out);
                            Timed t = run_checked(
                                {tool(size, {"--json", "prune", "--max-size", std::to_string(limit)}), env, out,
                                 std::nullopt},
                                "neuron_cache prune");
                            json doc = json::parse(read_text(out), nullptr, false);
                            std::size_t deleted = doc.is_discarded() ? 0 : doc.value("deleted", json::array()).size();
                            std::size_t restored = restore(size); // not timed
                            return json{{"seconds", t.seconds},
                                        {"deleted", deleted},
                                        {"restored", restored},
                                        {"limit_bytes", limit},
                                        {"peak_rss_bytes", t.status.peak_rss_bytes}};
                          }});
    contenders.push_back({"shell-prune", nullptr, [&, env, k, root](int) {
                            Size& size = sizes[k];
                            std::string script = "find " + quoted(root) +
                                                 "/neuronxcc-* -mindepth 1 -maxdepth 1 -type d -printf '%T@ %p\\n'"
                                                 " | sort -n | head -n " + std::to_string(to_delete[k]) +
                                                 " | cut -d' ' -f2- | xargs -r -d '\\n' rm -rf";
                            Timed t = run_checked({shell(script), env, dir / "shell-prune.log", std::nullopt},
                                                  "find | sort | head | rm");
                            std::size_t restored = restore(size); // not timed
                            return json{{"seconds", t.seconds}, {"deleted", restored}};
                          }});
    contenders.push_back({"hit", nullptr, [&, env](int) {
                            std::vector<double> times;
                            for (int i = 0; i < hits; ++i) {
                              fs::path out = dir / "hit-out.log";
                              wipe(out);
                              Timed t = run_checked({{context.programs.wrapper.string(), "compile", "--graph",
                                                      hit_graph.string(), "--output", (dir / "hit.neff").string()},
                                                     env, out, std::nullopt},
                                                    "a cache hit");
                              if (read_text(out).find("Using a cached neff") == std::string::npos)
                                throw std::runtime_error("the hit entry was not served from the cache");
                              times.push_back(t.seconds * 1000);
                            }
                            return json{{"median_ms", median(times)}, {"times_ms", times}};
                          }});
  }
  auto records = alternate(context, s.id, contenders);
  constexpr std::size_t kOps = 7; // as pushed above, per size
  enum Op { kStats, kStatsCold, kFindCount, kLs, kPrune, kShellPrune, kHit };
  auto rec = [&](std::size_t size_index, Op op) -> const std::vector<json>& {
    return records[size_index * kOps + op];
  };
  auto label = [&](std::size_t k) { return count_text(sizes[k].entries) + " entries"; };
  // Ours / the shell's, paired within each round.
  auto paired = [&](std::size_t k, Op ours, Op baseline) {
    std::vector<double> ratios;
    for (std::size_t r = 0; r < rec(k, ours).size(); ++r)
      ratios.push_back(rec(k, ours)[r]["seconds"].get<double>() / rec(k, baseline)[r]["seconds"].get<double>());
    return ratios;
  };

  for (std::size_t k = 1; k < sizes.size(); ++k) {
    std::vector<double> v = paired(k, kStats, kFindCount);
    double m = spread(v).median;
    Row row{"neuron_cache stats / `find ROOT -name model.done | wc -l`, " + label(k) + ", paired", "wall time ratio",
            "x", v, "≤ 0.5", m <= 0.5, "", 3};
    if (m > 0.5)
      row.note = "each entry still costs two stats (its directory and its NEFF) where find reads the directory";
    s.rows.push_back(row);
  }
  for (std::size_t k = 1; k < sizes.size(); ++k)
    s.rows.push_back({"neuron_cache stats with no summary (the first listing) / `find | wc -l`, " + label(k) +
                          ", paired",
                      "wall time ratio", "x", paired(k, kStatsCold, kFindCount), "", std::nullopt,
                      "every entry inspected: a directory read and a stat of each file", 3});
  for (std::size_t k = 1; k < sizes.size(); ++k) {
    std::vector<double> v = paired(k, kPrune, kShellPrune);
    double m = spread(v).median;
    Row row{"neuron_cache prune / find | sort | head | rm, " + label(k) + ", paired", "wall time ratio", "x", v,
            "≤ 1.5", m <= 1.5, "both delete the " + count_text(to_delete[k]) + " oldest entries", 3};
    if (m > 1.5)
      row.note += "; ours takes each entry's lock (and the framework's) before it moves the entry to the trash, "
                  "and looks at it again under the lock";
    s.rows.push_back(row);
  }
  for (std::size_t k = 0; k < sizes.size(); ++k)
    s.rows.push_back({"neuron_cache stats, " + label(k), "wall time", "s", column(rec(k, kStats), "seconds"), "",
                      std::nullopt, "", 3});
  for (std::size_t k = 0; k < sizes.size(); ++k)
    s.rows.push_back({"neuron_cache stats with no summary, " + label(k), "wall time", "s",
                      column(rec(k, kStatsCold), "seconds"), "", std::nullopt, "", 3});
  for (std::size_t k = 0; k < sizes.size(); ++k)
    s.rows.push_back({"`find ROOT -name model.done | wc -l`, " + label(k), "wall time", "s",
                      column(rec(k, kFindCount), "seconds"), "", std::nullopt, "", 3});
  for (std::size_t k = 0; k < sizes.size(); ++k)
    s.rows.push_back({"neuron_cache ls --json, " + label(k), "wall time", "s", column(rec(k, kLs), "seconds"), "",
                      std::nullopt, "", 3});
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    double deleted = spread(column(rec(k, kPrune), "deleted")).median;
    s.rows.push_back({"eviction pass (neuron_cache prune), " + label(k), "wall time", "s",
                      column(rec(k, kPrune), "seconds"), "", std::nullopt,
                      "deletes " + count_text(static_cast<std::size_t>(std::llround(deleted))) + " entries (the oldest ~10%)", 3});
  }
  for (std::size_t k = 0; k < sizes.size(); ++k)
    s.rows.push_back({"find | sort | head | rm, " + label(k), "wall time", "s", column(rec(k, kShellPrune), "seconds"),
                      "", std::nullopt, "deletes " + count_text(to_delete[k]) + " entries", 3});
  for (std::size_t k = 0; k < sizes.size(); ++k)
    s.rows.push_back({"cache hit (neuron_cc_wrapper compile), " + label(k), "wall time", "ms",
                      column(rec(k, kHit), "median_ms"), "", std::nullopt,
                      "median of " + std::to_string(hits) + " per run", 2});
  const std::size_t last = sizes.size() - 1;
  std::vector<double> hit_ratio;
  for (std::size_t r = 0; r < rec(0, kHit).size(); ++r)
    hit_ratio.push_back(rec(last, kHit)[r]["median_ms"].get<double>() / rec(0, kHit)[r]["median_ms"].get<double>());
  double hr = spread(hit_ratio).median;
  s.rows.push_back({"cache hit, " + label(last) + " / " + label(0) + ", paired", "ratio", "x", hit_ratio,
                    "independent of size (0.9–1.1)", hr >= 0.9 && hr <= 1.1, "", 3});

  json sizes_json = json::array();
  for (const auto& size : sizes)
    sizes_json.push_back({{"entries", size.entries + 1},
                          {"bulk_entries", size.entries},
                          {"bulk_bytes", size.bulk_bytes},
                          {"populate_seconds", size.populate_seconds}});
  s.workload = {{"sizes", sizes_json},
                {"entry", "done entries written straight into the layout: model.hlo_module.pb (~600 B), "
                          "compile_flags.json, model.neff (1 KiB), model.done, npc-entry.json; plus one entry "
                          "compiled for real, which the hits are served from"},
                {"last_use", "entry directory mtimes spread from 31 to 400 days ago (past the default 30-day TTL)"},
                {"eviction", "neuron_cache --json prune --max-size <90% of the bulk bytes>; the deleted entries are "
                             "written back (not timed) before the next operation"}};
  const char* op_names[kOps] = {"stats", "stats_no_summary", "find_count", "ls", "prune", "shell_prune", "hit"};
  s.raw = json::object();
  for (std::size_t k = 0; k < sizes.size(); ++k)
    for (std::size_t op = 0; op < kOps; ++op)
      s.raw[std::string(op_names[op]) + "_" + std::to_string(sizes[k].entries)] = rec(k, static_cast<Op>(op));
  s.workload["filesystem"] = {{"path", dir.string()}, {"type", mount.type}, {"mount_options", mount.options}};
  s.what = "On " + mount.type + " (`" + dir.string() + "`, mounted " + mount.options + "). " +
           "Three caches written straight into the on-disk layout (small files, no compiling): " +
           count_text(sizes[0].entries) + ", " + count_text(sizes[1].entries) + " and " + count_text(sizes[2].entries) +
           " done entries, all in one compiler-version directory, last used 31 to 400 days ago, plus one entry "
           "compiled for real. The eviction pass has a size limit of 90% of the cache, so it deletes the oldest "
           "~10% of the entries; they are written back, untimed, after each pass (and after each shell pipeline), "
           "flushed to the disk (syncfs), and in the two big caches the harness then waits 11 s, untimed, so that "
           "they are settled as entries unused for weeks are. Each hit figure is the median of " +
           std::to_string(hits) +
           " spawns of `neuron_cc_wrapper compile` for the real entry (process start included). The page cache is "
           "warm (the entries were just written). A listing keeps a summary of settled entries per compiler version "
           "(`.npc/summary/`): an entry whose directory is unchanged since costs a stat of its directory and one of "
           "its NEFF. `stats` runs with the summary the previous operations left (the entries an eviction pass "
           "deleted and the harness wrote back are new to it), `stats with no summary` after removing it (untimed). "
           "The shell baselines: `find ROOT -name model.done | wc -l` for the count, and for LRU eviction "
           "`find ROOT/neuronxcc-* -mindepth 1 -maxdepth 1 -type d -printf '%T@ %p\\n' | sort -n | head -n K | "
           "cut -d' ' -f2- | xargs -d '\\n' rm -rf`, K being the number of entries our pass deletes (counted by a dry "
           "run before the rounds): no locks, no look at the NEFF's atime, no check that an entry is in use.";
  if (!context.options.keep) {
    log(context, s.id + ": removing the caches");
    for (const auto& size : sizes) wipe(size.cache);
  }
  return s;
}

} // namespace

Scenario run_cache_scale(const Context& context) {
  Scenario s;
  s.id = "cache-scale";
  s.title = "5. The cache at scale";
  s.reproduce = "bench/run.sh --only cache-scale";
  return run_cache_scale_in(context, std::move(s), context.options.scratch / "cache-scale");
}

Scenario run_cache_scale_disk(const Context& context) {
  Scenario s;
  s.id = "cache-scale-disk";
  s.title = "5b. The cache at scale, on a disk file system";
  s.reproduce = "bench/run.sh --only cache-scale-disk";
  std::string pattern = (disk_scratch_parent() / "npc-bench-disk.XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("cannot create a folder from " + pattern + ": " + std::strerror(errno));
  const fs::path parent = pattern;
  struct Remove {
    fs::path path;
    bool keep;
    ~Remove() {
      std::error_code ec;
      if (!keep) fs::remove_all(path, ec);
    }
  } remove{parent, context.options.keep};
  return run_cache_scale_in(context, std::move(s), parent / "cache-scale-disk");
}

} // namespace bench
