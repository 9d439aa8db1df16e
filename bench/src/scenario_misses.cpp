// Scenario 13: what compiled after a pre-compile. `neuron_cache misses` on
// a cache of 20,000 entries whose last pre-compile is recorded (every entry
// but 50 of its graphs; those 50 made after it, so listed as never produced
// by the trial), against `find ROOT -name model.done | wc -l` on the same
// tree, in turn. The target is 0.5x find's time.

#include <chrono>

#include <npc/cache/key.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/precompile_record.hpp>
#include <npc/cache/store.hpp>
#include <npc/util/fs.hpp>

#include "fixtures.hpp"
#include "scenarios.hpp"

namespace bench {

namespace {

constexpr std::size_t kMadeAfter = 50;

// The pre-compile record of every bulk entry but the last kMadeAfter, which
// are then made after it (their graphs' times moved past its end).
void record_precompile(const fs::path& cache_dir, std::size_t entries) {
  npc::cache::PrecompileRecord record;
  const auto now = std::chrono::system_clock::now();
  record.started = now - std::chrono::minutes(30);
  record.ended = now;
  record.host = "bench";
  record.pid = 1;
  record.compiler_version = npc::cache::parse_key(bulk_entry_dir(cache_dir, BulkSpec{}, 0).string())->compiler_version;
  BulkSpec spec;
  for (std::size_t i = 0; i < entries; ++i) {
    const fs::path entry = bulk_entry_dir(cache_dir, spec, i);
    if (i + kMadeAfter < entries) {
      record.graphs.push_back({npc::cache::parse_key(entry.string())->str(), "compiled"});
    } else if (auto s = npc::util::set_mtime(entry / std::string(npc::cache::kGraphFile), now + std::chrono::seconds(5));
               !s) {
      throw std::runtime_error(s.error());
    }
  }
  npc::cache::Cache cache(cache_root(cache_dir));
  if (auto s = npc::cache::write_precompile_record(*cache.storage(), record); !s) throw std::runtime_error(s.error());
}

} // namespace

Scenario run_misses(const Context& context) {
  Scenario s;
  s.id = "misses";
  s.title = "13. What compiled after a pre-compile";
  s.reproduce = "bench/run.sh --only misses";
  const fs::path dir = context.options.scratch / "misses";
  make_dirs(dir);
  const std::size_t entries = context.options.quick ? 2000 : 20000;
  const fs::path cache = dir / "cache";
  BulkSpec spec;
  spec.count = entries;
  const double start = now_seconds();
  std::ignore = write_bulk_entries(cache, spec);
  record_precompile(cache, entries);
  log(context, s.id + ": wrote " + count_text(entries) + " entries and the record in " + num(now_seconds() - start, 1) +
                   " s");

  const Environment env = clean_environment(context.programs, cache);
  const fs::path root = cache_root(cache);
  std::vector<Contender> contenders;
  contenders.push_back({"misses", nullptr, [&](int) {
                          const fs::path out = dir / "misses.json";
                          wipe(out); // the output is appended to
                          Timed t = run_checked({{context.programs.cache_tool.string(), "--cache_dir", cache.string(),
                                                  "--json", "misses"},
                                                 env, out, std::nullopt},
                                                "neuron_cache misses");
                          json doc = json::parse(read_text(out), nullptr, false);
                          const std::size_t listed = doc.is_discarded() ? 0 : doc["misses"].size();
                          if (listed != kMadeAfter)
                            throw std::runtime_error("neuron_cache misses listed " + std::to_string(listed) +
                                                     " graphs, not " + std::to_string(kMadeAfter));
                          return json{{"seconds", t.seconds}, {"listed", listed},
                                      {"peak_rss_bytes", t.status.peak_rss_bytes}};
                        }});
  contenders.push_back({"find-count", nullptr, [&](int) {
                          Timed t = run_checked({{"/bin/sh", "-c", "find '" + root.string() +
                                                                       "' -name model.done | wc -l"},
                                                 env, dir / "find.log", std::nullopt},
                                                "find | wc -l");
                          return json{{"seconds", t.seconds}};
                        }});
  auto records = alternate(context, s.id, contenders);
  std::vector<double> ratios;
  for (std::size_t r = 0; r < records[0].size(); ++r)
    ratios.push_back(records[0][r]["seconds"].get<double>() / records[1][r]["seconds"].get<double>());
  const double m = spread(ratios).median;
  s.rows.push_back({"neuron_cache misses / `find ROOT -name model.done | wc -l`, " + count_text(entries) +
                        " entries, paired",
                    "wall time ratio", "x", ratios, "≤ 0.5", m <= 0.5,
                    "one listing per version folder and one stat per entry's graph", 3, true});
  s.rows.push_back({"neuron_cache misses, " + count_text(entries) + " entries", "wall time", "s",
                    column(records[0], "seconds"), "", std::nullopt, "", 3});
  s.rows.push_back({"`find ROOT -name model.done | wc -l`, " + count_text(entries) + " entries", "wall time", "s",
                    column(records[1], "seconds"), "", std::nullopt, "", 3});
  s.rows.push_back({"neuron_cache misses, " + count_text(entries) + " entries", "peak RSS", "MiB",
                    [&] {
                      std::vector<double> v;
                      for (const auto& r : records[0]) v.push_back(r["peak_rss_bytes"].get<double>() / (1 << 20));
                      return v;
                    }(),
                    "", std::nullopt, "", 1});
  s.workload = {{"entries", entries},
                {"made_after_the_precompile", kMadeAfter},
                {"record", "one pre-compile record listing every other entry's key"}};
  s.what = "`neuron_cache misses` on a cache of " + count_text(entries) +
           " done entries (tmpfs or the scratch folder's file system) whose last pre-compile is recorded in "
           "`.npc/precompiles/` with every entry's key but " + std::to_string(kMadeAfter) +
           ", whose graphs were made after it: the command lists those " + std::to_string(kMadeAfter) +
           " (checked each run). The baseline is `find ROOT -name model.done | wc -l` on the same tree, the two "
           "run in turn, and the figure is their ratio within each round.";
  s.raw = {{"misses", records[0]}, {"find_count", records[1]}};
  if (!context.options.keep) wipe(dir);
  return s;
}

} // namespace bench
