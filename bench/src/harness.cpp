#include "harness.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

#include <npc/util/clock.hpp>

namespace bench {

Programs find_programs(const fs::path& build_dir, bool with_standins) {
  Programs p;
  p.build_dir = fs::absolute(build_dir).lexically_normal();
  p.launcher = p.build_dir / "bin" / "neuron_parallel_compile";
  p.wrapper = p.build_dir / "bin" / "neuron_cc_wrapper";
  p.cache_tool = p.build_dir / "bin" / "neuron_cache";
  p.standin_dir = p.build_dir / "standin";
  p.compiler = p.standin_dir / "neuronx-cc";
  p.train = p.standin_dir / "standin_train";
  p.peak_rss = p.build_dir / "bench" / "npc_peak_rss";
  std::vector<fs::path> needed = {p.launcher, p.wrapper, p.cache_tool};
  if (with_standins) needed.insert(needed.end(), {p.compiler, p.train, p.peak_rss});
  for (const auto& program : needed)
    if (::access(program.c_str(), X_OK) != 0)
      throw std::runtime_error(program.string() + " is missing: build the project first (cmake --build " +
                               p.build_dir.string() + ")");
  return p;
}

json spawn_in_turn(const RunSpec& first, const RunSpec& second, int count) {
  std::vector<double> a, b;
  for (int i = 0; i < count; ++i) {
    for (int k = 0; k < 2; ++k) {
      const bool first_now = (k == 0) == (i % 2 == 0);
      const RunSpec& spec = first_now ? first : second;
      Timed t = run_timed(spec);
      if (!t.status.success()) throw std::runtime_error(spec.argv.front() + " failed: " + t.status.describe());
      (first_now ? a : b).push_back(t.seconds * 1000);
    }
  }
  const double ma = median(a), mb = median(b);
  return json{{"first_ms", ma}, {"second_ms", mb}, {"ratio", ma / mb}, {"spawns", count}};
}

double now_seconds() { return npc::util::monotonic_seconds(); }

double Context::elapsed() const { return now_seconds() - started; }

namespace {
fs::path& scratch_storage() {
  static fs::path path;
  return path;
}
} // namespace

const fs::path& scratch_dir() { return scratch_storage(); }
void set_scratch_dir(const fs::path& path) { scratch_storage() = path; }

Environment clean_environment(const Programs& programs, const fs::path& cache_dir) {
  Environment env = Environment::current();
  std::vector<std::string> drop;
  for (const auto& entry : env.entries()) {
    std::string name = entry.substr(0, entry.find('='));
    if (name.starts_with("NEURON") || name.starts_with("STANDIN_") || name == "RANK" ||
        name == "WORLD_SIZE" || name == "LOCAL_RANK" || name == "LOCAL_WORLD_SIZE")
      drop.push_back(name);
  }
  for (const auto& name : drop) env.unset(name);
  std::string path = env.get("PATH").value_or("/usr/local/bin:/usr/bin:/bin");
  env.set("PATH", programs.standin_dir.string() + ":" + path);
  env.set("NEURON_CC", programs.compiler.string());
  env.set("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1"); // no Trainium here: name the target
  // How standin_train finds the compile entry.
  env.set("NEURON_CC_WRAPPER", programs.wrapper.string());
  env.set("NEURON_CC_FLAGS", "--cache_dir=" + cache_dir.string());
  // Temporary files of every program stay in the scratch area.
  if (!scratch_dir().empty()) env.set("TMPDIR", scratch_dir().string());
  return env;
}

void use_s3_endpoint(Environment& env, const std::string& endpoint, const std::string& access_key,
                     const std::string& secret_key, const fs::path& no_files_dir) {
  env.set("AWS_ACCESS_KEY_ID", access_key);
  env.set("AWS_SECRET_ACCESS_KEY", secret_key);
  env.set("AWS_REGION", "us-east-1");
  env.set("AWS_ENDPOINT_URL_S3", endpoint);
  env.set("AWS_CONFIG_FILE", (no_files_dir / "no-aws-config").string());
  env.set("AWS_SHARED_CREDENTIALS_FILE", (no_files_dir / "no-aws-credentials").string());
  env.set("AWS_EC2_METADATA_DISABLED", "true");
  env.unset("AWS_PROFILE");
  env.unset("AWS_SESSION_TOKEN");
  env.unset("AWS_ENDPOINT_URL");
}

Timed run_timed(const RunSpec& spec) {
  npc::util::SpawnOptions options;
  options.argv = spec.argv;
  options.environment = spec.environment;
  options.working_dir = spec.working_dir;
  options.output = npc::util::OutputTo::file;
  options.output_file = spec.output;
  Timed timed;
  double start = now_seconds();
  auto child = npc::util::spawn(options);
  if (!child) throw std::runtime_error("cannot start " + spec.argv.front() + ": " + child.error());
  timed.status = npc::util::wait_child(child->pid);
  timed.seconds = now_seconds() - start;
  return timed;
}

Timed run_checked(const RunSpec& spec, const std::string& what) {
  Timed timed = run_timed(spec);
  if (!timed.status.success()) {
    std::string tail;
    if (spec.output != "/dev/null") {
      std::string text = read_text(spec.output);
      tail = text.size() > 2000 ? text.substr(text.size() - 2000) : text;
    }
    throw std::runtime_error(what + " failed (" + timed.status.describe() + ")" +
                             (tail.empty() ? "" : "; its output ends with:\n" + tail));
  }
  return timed;
}

Timed run_checked_rss(const Context& context, RunSpec spec, const std::string& what) {
  fs::path out = context.options.scratch / ("peak-rss." + std::to_string(::getpid()));
  std::vector<std::string> argv = {context.programs.peak_rss.string(), out.string(), "--"};
  argv.insert(argv.end(), spec.argv.begin(), spec.argv.end());
  spec.argv = argv;
  Timed t = run_checked(spec, what);
  std::string text = read_text(out);
  t.status.peak_rss_bytes = text.empty() ? 0 : std::stoull(text);
  fs::remove(out);
  return t;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

Spread spread(std::vector<double> values) {
  Spread s;
  s.n = values.size();
  if (values.empty()) return s;
  s.median = median(values);
  auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  s.min = *lo;
  s.max = *hi;
  return s;
}

namespace {

// Processes whose parent is this one (orphans of a run are handed to us: the
// driver is a subreaper).
std::size_t count_children() {
  std::size_t n = 0;
  const std::string self = std::to_string(::getpid());
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = read_text(e.path() / "stat");
    auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 1));
    std::string state, ppid;
    fields >> state >> ppid;
    if (ppid == self && state != "Z") ++n;
  }
  return n;
}

} // namespace

std::size_t settle_children() {
  std::size_t most = 0;
  double deadline = now_seconds() + 30;
  for (;;) {
    int status = 0;
    while (::waitpid(-1, &status, WNOHANG) > 0) {
    }
    std::size_t n = count_children();
    most = std::max(most, n);
    if (n == 0) return most;
    if (now_seconds() > deadline) {
      npc::util::kill_all_descendants();
      return most;
    }
    ::usleep(20000);
  }
}

std::vector<std::vector<json>> alternate(const Context& context, const std::string& label,
                                         std::vector<Contender>& contenders, int runs, Settle settle) {
  std::vector<std::vector<json>> records(contenders.size());
  const std::size_t k = contenders.size();
  runs = std::max(runs, context.options.runs);
  for (int run = 0; run < runs; ++run) {
    for (std::size_t position = 0; position < k; ++position) {
      std::size_t i = (position + static_cast<std::size_t>(run)) % k;
      Contender& c = contenders[i];
      if (c.prepare) c.prepare(run);
      json record = c.measure(run);
      // Nothing a run left behind may run into the next one.
      if (settle == Settle::yes)
        if (std::size_t left = settle_children(); left > 0) record["processes_left_running"] = left;
      record["run"] = run + 1;
      record["position"] = position + 1;
      records[i].push_back(record);
    }
    log(context, label + ": round " + std::to_string(run + 1) + "/" + std::to_string(runs) + " done");
  }
  return records;
}

json to_json(const Row& row) {
  Spread s = spread(row.values);
  json j = {{"contender", row.contender},
            {"figure", row.figure},
            {"unit", row.unit},
            {"values", row.values},
            {"median", s.median},
            {"min", s.min},
            {"max", s.max},
            {"runs", s.n},
            {"decimals", row.decimals}};
  if (!row.target.empty()) j["target"] = row.target;
  if (row.met) j["met"] = *row.met;
  if (!row.note.empty()) j["note"] = row.note;
  if (row.headline) j["headline"] = true;
  return j;
}

json to_json(const Scenario& scenario) {
  json rows = json::array();
  for (const auto& row : scenario.rows) rows.push_back(to_json(row));
  return {{"id", scenario.id},
          {"title", scenario.title},
          {"what", scenario.what},
          {"reproduce", scenario.reproduce},
          {"workload", scenario.workload},
          {"rows", rows},
          {"notes", scenario.notes},
          {"runs", scenario.raw},
          {"scenario_seconds", scenario.seconds}};
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + path.string());
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

Mount mount_of(const fs::path& path) {
  std::string target = fs::weakly_canonical(path).string();
  std::istringstream mounts(read_text("/proc/mounts"));
  std::string line;
  Mount best;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string device;
    Mount m;
    fields >> device >> m.point >> m.type >> m.options;
    bool prefix = target == m.point || m.point == "/" ||
                  (target.starts_with(m.point) && target.size() > m.point.size() && target[m.point.size()] == '/');
    if (prefix && m.point.size() >= best.point.size()) best = m;
  }
  return best;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void make_dirs(const fs::path& path) { fs::create_directories(path); }

void wipe(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) throw std::runtime_error("cannot remove " + path.string() + ": " + ec.message());
}

void copy_tree(const fs::path& from, const fs::path& to) {
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
}

std::vector<double> column(const std::vector<json>& records, const std::string& key) {
  std::vector<double> values;
  for (const auto& r : records)
    if (r.contains(key) && r[key].is_number()) values.push_back(r[key].get<double>());
  return values;
}

void log(const Context& context, const std::string& line) {
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "[%6.1fs] ", context.elapsed());
  std::cerr << "npc_bench: " << stamp << line << std::endl;
}

std::string count_text(std::size_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string num(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

} // namespace bench
