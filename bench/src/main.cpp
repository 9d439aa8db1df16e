// npc_bench: runs the benchmark scenarios and writes docs/performance.json
// (every raw figure) and docs/performance.md (the tables). bench/run.sh is the
// documented way to run it.

#include <csignal>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <pthread.h>
#include <sstream>
#include <sys/utsname.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <openssl/opensslv.h> // the version of the libcrypto.a linked in

#include <npc/util/process.hpp>

#include "harness.hpp"
#include "render.hpp"
#include "scenarios.hpp"

namespace {

using namespace bench;

struct Entry {
  const char* id;
  Scenario (*run)(const Context&);
};

const std::vector<Entry> kScenarios = {
    {"schedule-sleep", run_schedule_sleep}, {"schedule-busy", run_schedule_busy},
    {"memory", run_memory},                 {"warm-start", run_warm},
    {"launcher-overhead", run_overhead},    {"cache-scale", run_cache_scale},
    {"cache-scale-disk", run_cache_scale_disk},
    {"hashing", run_hashing},               {"launcher-memory", run_launcher_memory},
    {"s3-transfer", run_s3_transfer},       {"before-after", run_before_after},
    {"cluster", run_cluster},               {"cluster-short", run_cluster_short},
    {"masquerade", run_masquerade},
    {"observe", run_observe},               {"misses", run_misses},
};

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return text;
}

std::string cpuinfo_field(const std::string& cpuinfo, const std::string& name) {
  auto at = cpuinfo.find(name);
  if (at == std::string::npos) return "";
  auto colon = cpuinfo.find(':', at);
  auto end = cpuinfo.find('\n', at);
  if (colon == std::string::npos || colon > end) return "";
  std::string value = cpuinfo.substr(colon + 1, end - colon - 1);
  while (!value.empty() && value.front() == ' ') value.erase(value.begin());
  return value;
}

json machine_facts(const Programs& programs) {
  std::string cpuinfo = read_text("/proc/cpuinfo");
  std::string meminfo = read_text("/proc/meminfo");
  double mem_total = 0;
  if (auto at = meminfo.find("MemTotal:"); at != std::string::npos)
    mem_total = std::stod(meminfo.substr(at + 9)) * 1024;
  utsname u{};
  ::uname(&u);
  std::string flags = cpuinfo_field(cpuinfo, "flags");
  bool sha = (" " + flags + " ").find(" sha_ni ") != std::string::npos ||
             cpuinfo.find(" sha2") != std::string::npos;
#if defined(__clang__)
  std::string cxx = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  std::string cxx = std::string("g++ ") + __VERSION__;
#else
  std::string cxx = "unknown";
#endif
  std::vector<double> spawns;
  RunSpec floor{{"/bin/true"}, clean_environment(programs, "/nonexistent"), "/dev/null", std::nullopt};
  for (int i = 0; i < 20; ++i) spawns.push_back(run_timed(floor).seconds * 1000);
  return {{"nproc", static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN))},
          {"cpu_model", cpuinfo_field(cpuinfo, "model name")},
          {"sha_ni", sha},
          {"mem_total_bytes", mem_total},
          {"kernel", std::string(u.sysname) + " " + u.release},
          {"cxx", cxx},
          {"build_type", NPC_BENCH_BUILD_TYPE},
          {"openssl", OPENSSL_VERSION_TEXT},
          {"bin_true_ms", median(spawns)}};
}

// The 1, 5 and 15 minute load averages, "a b c".
std::string load_average() {
  std::istringstream in(read_text("/proc/loadavg"));
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

// Milliseconds to create and then delete one cache-entry-like directory of
// five small files, over 400 of them.
json file_churn(const fs::path& parent) {
  fs::path dir = parent / ("npc-bench-churn." + std::to_string(::getpid()));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return json{{"error", ec.message()}};
  const int entries = 400;
  double start = now_seconds();
  for (int i = 0; i < entries; ++i) {
    fs::path entry = dir / std::to_string(i);
    fs::create_directory(entry);
    for (const char* name : {"a", "b", "c", "d", "e"}) write_text(entry / name, std::string(600, 'x'));
  }
  double created = now_seconds();
  fs::remove_all(dir, ec);
  double removed = now_seconds();
  Mount m = mount_of(parent);
  return {{"path", parent.string()},
          {"filesystem", m.type},
          {"mount_options", m.options},
          {"create_ms_per_entry", (created - start) * 1000 / entries},
          {"delete_ms_per_entry", (removed - created) * 1000 / entries}};
}

// Where the scratch directory goes when none is given: $NPC_BENCH_SCRATCH,
// else /dev/shm when it is a tmpfs with 4 GiB free (the cache-at-scale
// scenario writes and deletes ~600,000 small files; on a disk mounted with
// online discard each deletion can cost milliseconds), else $TMPDIR or /tmp.
fs::path scratch_parent() {
  if (const char* explicit_dir = std::getenv("NPC_BENCH_SCRATCH"); explicit_dir && *explicit_dir) return explicit_dir;
  std::error_code ec;
  if (fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0 && mount_of("/dev/shm").type == "tmpfs") {
    auto space = fs::space("/dev/shm", ec);
    if (!ec && space.available >= (4ull << 30)) return "/dev/shm";
  }
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

// On SIGINT/SIGTERM/SIGHUP: end every process the run started, then exit.
void start_signal_thread() {
  static sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  pthread_t thread;
  pthread_create(
      &thread, nullptr,
      [](void*) -> void* {
        int sig = 0;
        sigwait(&set, &sig);
        std::cerr << "npc_bench: interrupted; stopping the processes it started" << std::endl;
        npc::util::kill_all_descendants(10);
        std::_Exit(128 + sig);
      },
      nullptr);
  pthread_detach(thread);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Runs the neuron_parallel_compile benchmarks and writes the performance report.", "npc_bench"};
  std::string build_dir = NPC_BENCH_DEFAULT_BUILD_DIR;
  std::string json_path, md_path, only, scratch, revision = "unknown", command = "bench/run.sh", render_only;
  double build_seconds = -1;
  Options options;
  app.add_option("--build-dir", build_dir, "Build tree holding bin/ and standin/");
  app.add_option("--json", json_path, "Write the results here");
  app.add_option("--md", md_path, "Write the markdown report here");
  app.add_option("--runs", options.runs, "Repetitions of every comparison (at least 5 for published figures)")
      ->check(CLI::Range(1, 100));
  app.add_option("--only", only, "Comma-separated scenario ids to run (default: all)");
  app.add_flag("--quick", options.quick, "Small workloads, to try the harness (figures not comparable)");
  app.add_option("--scratch", scratch, "Scratch directory (must exist; default: a new one under $TMPDIR)");
  app.add_option("--build-seconds", build_seconds, "Build time to show in the report");
  app.add_option("--revision", revision, "Source revision to show in the report");
  app.add_option("--command-line", command, "The command to show in the report");
  app.add_option("--render", render_only, "Only re-render --md from this results file");
  app.add_option("--before-build", options.before_build,
                 "An older revision's build tree, for the before-after scenario (bench/run.sh builds it)");
  app.add_option("--before-revision", options.before_revision, "Which revision --before-build holds");
  bool keep = false;
  app.add_flag("--keep", keep, "Keep the scratch directory (to look at what the runs left)");
  CLI11_PARSE(app, argc, argv);

  if (!render_only.empty()) {
    json doc = json::parse(read_text(render_only));
    write_text(md_path.empty() ? "performance.md" : md_path, render_markdown(doc));
    return 0;
  }

  std::vector<Entry> selected;
  if (only.empty()) {
    selected = kScenarios;
  } else {
    std::stringstream ids(only);
    std::string id;
    while (std::getline(ids, id, ',')) {
      bool found = false;
      for (const auto& e : kScenarios)
        if (id == e.id) {
          selected.push_back(e);
          found = true;
        }
      if (!found) {
        std::cerr << "npc_bench: unknown scenario '" << id << "'; known:";
        for (const auto& e : kScenarios) std::cerr << " " << e.id;
        std::cerr << "\n";
        return 2;
      }
    }
  }

  npc::util::become_subreaper();
  start_signal_thread();
  Context context;
  context.started = now_seconds();
  context.options = options;
  context.options.keep = keep;
  try {
    context.programs = find_programs(build_dir);
  } catch (const std::exception& e) {
    std::cerr << "npc_bench: " << e.what() << "\n";
    return 2;
  }
  bool own_scratch = scratch.empty();
  if (own_scratch) {
    std::string pattern = (scratch_parent() / "npc-bench.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::cerr << "npc_bench: cannot create a scratch directory from " << pattern << "\n";
      return 2;
    }
    context.options.scratch = pattern;
  } else {
    context.options.scratch = fs::absolute(scratch);
  }
  set_scratch_dir(context.options.scratch);
  log(context, "scratch directory " + context.options.scratch.string());

  json doc = {{"schema", 1},
              {"generated_utc", utc_now()},
              {"command", command},
              {"revision", revision},
              {"runs_per_comparison", context.options.runs},
              {"quick", context.options.quick}};
  doc["machine"] = machine_facts(context.programs);
  {
    const char* tmp = std::getenv("TMPDIR");
    fs::path disk_tmp = tmp && *tmp ? tmp : "/tmp";
    doc["machine"]["scratch"] = file_churn(context.options.scratch);
    if (mount_of(disk_tmp).point != mount_of(context.options.scratch).point)
      doc["machine"]["tmp"] = file_churn(disk_tmp);
    doc["machine"]["load_average_at_start"] = load_average();
  }
  json scenarios = json::array();
  json errors = json::array();
  for (const auto& entry : selected) {
    log(context, std::string("scenario ") + entry.id);
    std::string load_before = load_average();
    double start = now_seconds();
    try {
      Scenario s = entry.run(context);
      s.seconds = now_seconds() - start;
      json j = to_json(s);
      j["ran_utc"] = utc_now();
      j["load_average_before"] = load_before;
      j["load_average_after"] = load_average();
      scenarios.push_back(j);
      log(context, std::string("scenario ") + entry.id + " done in " + num(s.seconds, 1) + " s");
    } catch (const std::exception& e) {
      log(context, std::string("scenario ") + entry.id + " FAILED: " + e.what());
      errors.push_back({{"scenario", entry.id}, {"message", e.what()}});
    }
    std::error_code ec;
    if (!keep) fs::remove_all(context.options.scratch / entry.id, ec);
  }
  doc["duration_seconds"] = context.elapsed();
  doc["machine"]["load_average_at_end"] = load_average();
  if (build_seconds >= 0) doc["build_seconds"] = build_seconds;

  // A partial run (--only) updates those scenarios in an existing results
  // file and keeps the others.
  if (!only.empty() && !json_path.empty() && fs::exists(json_path)) {
    json old = json::parse(read_text(json_path), nullptr, false);
    if (!old.is_discarded() && old.contains("scenarios") && old.value("quick", false) == context.options.quick) {
      json merged = json::array();
      for (const auto& e : kScenarios) {
        const json* pick = nullptr;
        for (const auto& s : scenarios)
          if (s["id"] == e.id) pick = &s;
        if (pick == nullptr)
          for (const auto& s : old["scenarios"])
            if (s["id"] == e.id) pick = &s;
        if (pick != nullptr) merged.push_back(*pick);
      }
      json partial = old.value("partial_runs", json::array());
      json ids = json::array();
      for (const auto& s : selected) ids.push_back(s.id);
      partial.push_back({{"utc", doc["generated_utc"]},
                         {"scenarios", ids},
                         {"duration_seconds", doc["duration_seconds"]},
                         {"machine", doc["machine"]}});
      old["partial_runs"] = partial;
      old["scenarios"] = merged;
      old["errors"] = errors;
      doc = old;
      scenarios = merged;
    }
  }
  doc["scenarios"] = scenarios;
  doc["errors"] = errors;

  if (!json_path.empty()) write_text(json_path, doc.dump(1) + "\n");
  if (!md_path.empty()) write_text(md_path, render_markdown(doc));
  if (own_scratch && !keep) {
    std::error_code ec;
    fs::remove_all(context.options.scratch, ec);
  }
  log(context, "done in " + num(context.elapsed(), 1) + " s" + (json_path.empty() ? "" : "; wrote " + json_path) +
                   (md_path.empty() ? "" : " and " + md_path));
  return errors.empty() ? 0 : 1;
}
