#pragma once
// What every scenario shares: where the programs are, running a process and
// timing it, the median and spread of repeated runs, running contenders side
// by side in alternating order, and the result records the report is made of.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <npc/util/process.hpp>

namespace bench {

namespace fs = std::filesystem;
using json = nlohmann::json;
using npc::util::Environment;
using npc::util::ExitStatus;

// The programs under test and the stand-ins, all from one build tree.
struct Programs {
  fs::path build_dir;
  fs::path launcher;      // bin/neuron_parallel_compile
  fs::path wrapper;       // bin/neuron_cc_wrapper
  fs::path cache_tool;    // bin/neuron_cache
  fs::path compiler;      // standin/neuronx-cc
  fs::path train;         // standin/standin_train
  fs::path standin_dir;   // standin/ (put first on PATH)
  fs::path peak_rss;      // bench/npc_peak_rss
};

// Throws when one is missing; `with_standins` false looks only for the
// product's three programs (an older revision's build).
[[nodiscard]] Programs find_programs(const fs::path& build_dir, bool with_standins = true);

struct Options {
  int runs = 5;
  bool quick = false; // smaller workloads, for trying the harness out
  fs::path scratch;
  bool keep = false; // leave what the scenarios wrote in the scratch directory
  fs::path before_build;       // an older revision's build tree (the before-after scenario)
  std::string before_revision; // which revision that is
};

struct Context {
  Programs programs;
  Options options;
  // Seconds since the driver started (for the progress lines).
  [[nodiscard]] double elapsed() const;
  double started = 0;
};

// The run's scratch directory (TMPDIR of every program the run starts).
[[nodiscard]] const fs::path& scratch_dir();
void set_scratch_dir(const fs::path& path);

// Our environment with every NEURON_* and STANDIN_* variable removed, the
// stand-in directory first on PATH, NEURON_CC set to the stand-in compiler
// the cache at <cache_dir> (--cache_dir names the root) and TMPDIR in the scratch
// directory.
[[nodiscard]] Environment clean_environment(const Programs& programs, const fs::path& cache_dir);

// Points the S3 client of every program at one endpoint with these keys and
// nothing else (no AWS profile, config file or instance metadata; the files
// named under `no_files_dir` do not exist).
void use_s3_endpoint(Environment& env, const std::string& endpoint, const std::string& access_key,
                     const std::string& secret_key, const fs::path& no_files_dir);

// The stand-in compiler holds little memory: the launcher's default plan of
// 64 GiB per compile (the real compiler's) would run one at a time here.
// Scenarios that do not set the parallelism themselves plan 2 GiB per compile.
inline constexpr const char* kStandinMemoryOption = "--memory-per-compile";
inline constexpr const char* kStandinMemory = "2GiB";

// The cache root a --cache_dir gives: the directory itself.
[[nodiscard]] inline fs::path cache_root(const fs::path& cache_dir) { return cache_dir; }

struct Timed {
  double seconds = 0;
  ExitStatus status;
};

struct RunSpec {
  std::vector<std::string> argv;
  Environment environment;
  fs::path output = "/dev/null"; // stdout and stderr appended here
  std::optional<fs::path> working_dir;
};

// Starts the process, waits for it, returns its wall time (from just before
// the spawn to the reaping) and its status, with peak RSS from wait4.
[[nodiscard]] Timed run_timed(const RunSpec& spec);
// As run_timed, and throws when the process does not exit 0.
Timed run_checked(const RunSpec& spec, const std::string& what);
// As run_checked, with the peak RSS measured through npc_peak_rss, so that it
// is the command's own and not partly the driver's (the wall time includes
// the small helper's start, about a millisecond).
Timed run_checked_rss(const Context& context, RunSpec spec, const std::string& what);

[[nodiscard]] double now_seconds();

// Two commands spawned in turn `count` times each (which goes first
// alternates), so that both meet the same moments of the machine: the
// median of each in ms ("first_ms", "second_ms") and their ratio
// ("ratio", first over second). Throws when a spawn does not exit 0.
[[nodiscard]] json spawn_in_turn(const RunSpec& first, const RunSpec& second, int count);

struct Spread {
  double median = 0;
  double min = 0;
  double max = 0;
  std::size_t n = 0;
};
[[nodiscard]] Spread spread(std::vector<double> values);
[[nodiscard]] double median(std::vector<double> values);

// One contender of a side-by-side comparison: `prepare` (untimed) sets up a
// fresh state for one run, `measure` runs and returns that run's record.
struct Contender {
  std::string name;
  std::function<void(int run)> prepare;
  std::function<json(int run)> measure;
};

// Runs every contender `runs` times. Round r runs them in the order rotated
// by r, so no contender is always first (or last) after another. The records
// come back per contender, in run order, each with "run" and "position".
// `runs` overrides the number of rounds (never fewer than the configured).
// Between runs it waits for processes a run left behind (settle_children),
// unless `settle` is Settle::no: for a scenario with a server of its own
// running as a child, whose runs cannot leave anything behind.
enum class Settle { yes, no };
std::vector<std::vector<json>> alternate(const Context& context, const std::string& label,
                                         std::vector<Contender>& contenders, int runs = 0,
                                         Settle settle = Settle::yes);

// Waits for processes a run left behind (up to 30 s, then kills them);
// returns how many there were.
std::size_t settle_children();

// A figure as the report shows it: one row of a scenario's table.
struct Row {
  std::string contender;
  std::string figure;          // what the number is
  std::string unit;            // "x", "s", "ms", "MB/s", "MiB", ""
  std::vector<double> values;  // one per run
  std::string target;          // as text, empty when there is none
  std::optional<bool> met;
  std::string note;            // shown next to the figure
  int decimals = 3;
  bool headline = false;       // also shown in the headline table (rows with a target always are)
};

struct Scenario {
  std::string id;
  std::string title;
  std::string what;          // markdown: what is measured and how
  std::string reproduce;     // the command that runs only this scenario
  json workload = json::object();
  std::vector<Row> rows;
  json raw = json::object(); // every per-run record
  std::vector<std::string> notes; // markdown paragraphs after the table
  double seconds = 0;        // how long the scenario took to run
};

[[nodiscard]] json to_json(const Row& row);
[[nodiscard]] json to_json(const Scenario& scenario);

// The mount a path is on (the longest mount point that prefixes it).
struct Mount {
  std::string point, type, options;
};
[[nodiscard]] Mount mount_of(const fs::path& path);

// Small helpers.
void write_text(const fs::path& path, const std::string& text);
[[nodiscard]] std::string read_text(const fs::path& path);
void make_dirs(const fs::path& path);
void wipe(const fs::path& path);
// Copies a directory tree (files, directories; mtimes are not kept).
void copy_tree(const fs::path& from, const fs::path& to);
[[nodiscard]] std::vector<double> column(const std::vector<json>& records, const std::string& key);
void log(const Context& context, const std::string& line);
// 100000 -> "100,000".
[[nodiscard]] std::string count_text(std::size_t n);
// A number with a fixed count of decimals.
[[nodiscard]] std::string num(double value, int decimals = 2);

constexpr double kMiB = 1024.0 * 1024.0;

} // namespace bench
