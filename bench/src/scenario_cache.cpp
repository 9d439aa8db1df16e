// Scenario 5: the cache at scale. The same operations on a cache of 100
// entries and one of 100,000: neuron_cache stats, ls --json, an eviction pass
// that really deletes a share of the entries, and a cache hit through the
// compile entry.

#include <algorithm>
#include <thread>

#include "fixtures.hpp"
#include "scenarios.hpp"

namespace bench {

namespace {
// As Cache::list_version: one thread per core, at most 8.
unsigned listing_threads() { return std::min(8u, std::max(1u, std::thread::hardware_concurrency())); }
} // namespace

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

// Writes back the bulk entries an eviction pass deleted.
std::size_t restore(Size& size) {
  std::size_t restored = 0;
  for (std::size_t i = 0; i < size.entry_dirs.size(); ++i) {
    if (fs::exists(size.entry_dirs[i])) continue;
    std::ignore = write_bulk_entries(size.cache, bulk(i, 1));
    ++restored;
  }
  return restored;
}

} // namespace

Scenario run_cache_scale(const Context& context) {
  Scenario s;
  s.id = "cache-scale";
  s.title = "5. The cache at scale";
  s.reproduce = "bench/run.sh --only cache-scale";
  fs::path dir = context.options.scratch / s.id;
  make_dirs(dir);
  const std::size_t big = context.options.quick ? 10000 : 100000;
  const double keep_share = 0.9; // the eviction pass deletes the oldest ~10%
  const int hits = context.options.quick ? 5 : 20;

  std::vector<Size> sizes(2);
  sizes[0].entries = 100;
  sizes[1].entries = big;
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
    log(context, "cache-scale: wrote " + count_text(size.entries) + " entries in " +
                     num(size.populate_seconds, 1) + " s");
  }

  auto tool = [&](const Size& size, std::vector<std::string> words) {
    std::vector<std::string> argv = {context.programs.cache_tool.string(), "--cache_dir", size.cache.string()};
    argv.insert(argv.end(), words.begin(), words.end());
    return argv;
  };
  std::vector<Contender> contenders;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    Environment env = clean_environment(context.programs, sizes[k].cache);
    contenders.push_back({"stats", nullptr, [&, env, k](int) {
                            Size& size = sizes[k];
                            Timed t = run_checked({tool(size, {"stats"}), env, dir / "stats.log", std::nullopt},
                                                  "neuron_cache stats");
                            return json{{"seconds", t.seconds}, {"peak_rss_bytes", t.status.peak_rss_bytes}};
                          }});
    contenders.push_back({"ls", nullptr, [&, env, k](int) {
                            Size& size = sizes[k];
                            Timed t = run_checked({tool(size, {"ls", "--json"}), env, "/dev/null", std::nullopt},
                                                  "neuron_cache ls --json");
                            return json{{"seconds", t.seconds}, {"peak_rss_bytes", t.status.peak_rss_bytes}};
                          }});
    contenders.push_back({"prune", nullptr, [&, env, k](int) {
                            Size& size = sizes[k];
                            auto limit = static_cast<std::uint64_t>(static_cast<double>(size.bulk_bytes) * keep_share);
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
  auto rec = [&](std::size_t size_index, std::size_t op) -> const std::vector<json>& {
    return records[size_index * 4 + op];
  };
  auto label = [&](std::size_t k) { return count_text(sizes[k].entries) + " entries"; };

  for (std::size_t k = 0; k < 2; ++k) {
    std::vector<double> v = column(rec(k, 0), "seconds");
    Row row{"neuron_cache stats, " + label(k), "wall time", "s", v, "", std::nullopt, "", 3};
    if (k == 1) {
      row.target = "≤ 1 s";
      row.met = spread(v).median <= 1.0;
      if (!*row.met)
        row.note = "it inspects every entry: a directory read and a stat of each file, " +
                   num(spread(v).median / static_cast<double>(sizes[1].entries) * 1e6, 0) +
                   " µs per entry here, on " + std::to_string(listing_threads()) +
                   " thread(s) (the listing uses one per core, at most 8)";
    }
    s.rows.push_back(row);
  }
  for (std::size_t k = 0; k < 2; ++k)
    s.rows.push_back({"neuron_cache ls --json, " + label(k), "wall time", "s", column(rec(k, 1), "seconds"), "",
                      std::nullopt, "", 3});
  for (std::size_t k = 0; k < 2; ++k) {
    std::vector<double> v = column(rec(k, 2), "seconds");
    double deleted = spread(column(rec(k, 2), "deleted")).median;
    Row row{"eviction pass (neuron_cache prune), " + label(k), "wall time", "s", v, "", std::nullopt,
            "deletes " + num(deleted, 0) + " entries (the oldest ~10%)", 3};
    if (k == 1) {
      row.target = "≤ 2 s";
      row.met = spread(v).median <= 2.0;
      if (!*row.met)
        row.note = "a pass lists the whole cache first (as `stats` does, above), then moves each victim to the "
                   "trash and deletes its files; deletes " + num(deleted, 0) + " entries";
    }
    s.rows.push_back(row);
  }
  for (std::size_t k = 0; k < 2; ++k)
    s.rows.push_back({"cache hit (neuron_cc_wrapper compile), " + label(k), "wall time", "ms",
                      column(rec(k, 3), "median_ms"), "", std::nullopt,
                      "median of " + std::to_string(hits) + " per run", 2});
  std::vector<double> hit_ratio;
  for (std::size_t r = 0; r < rec(0, 3).size(); ++r)
    hit_ratio.push_back(rec(1, 3)[r]["median_ms"].get<double>() / rec(0, 3)[r]["median_ms"].get<double>());
  double hr = spread(hit_ratio).median;
  s.rows.push_back({"cache hit, " + label(1) + " / " + label(0) + ", paired", "ratio", "x", hit_ratio,
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
  s.raw = {{"stats_100", rec(0, 0)}, {"ls_100", rec(0, 1)}, {"prune_100", rec(0, 2)}, {"hit_100", rec(0, 3)},
           {"stats_big", rec(1, 0)}, {"ls_big", rec(1, 1)}, {"prune_big", rec(1, 2)}, {"hit_big", rec(1, 3)}};
  s.what = "Two caches written straight into the on-disk layout (small files, no compiling): " +
           count_text(sizes[0].entries) + " and " + count_text(sizes[1].entries) +
           " done entries, all in one compiler-version directory, last used 31 to 400 days ago, plus one entry "
           "compiled for real. The eviction pass has a size limit of 90% of the cache, so it deletes the oldest "
           "~10% of the entries; they are written back, untimed, after each pass. Each hit figure is the median of " +
           std::to_string(hits) +
           " spawns of `neuron_cc_wrapper compile` for the real entry (process start included). The page cache is "
           "warm (the entries were just written).";
  if (!context.options.keep) {
    log(context, "cache-scale: removing the caches");
    for (const auto& size : sizes) wipe(size.cache);
  }
  return s;
}

} // namespace bench
