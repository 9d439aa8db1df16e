#include "cache_test.hpp"

#include <algorithm>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <npc/util/process.hpp>

#include "files.hpp"
#include "paths.hpp"

namespace npc::test {

void CacheTest::SetUp() {
  TempDirTest::SetUp();
  if (HasFatalFailure()) return;
  env_ = {{"NEURON_CC_FLAGS", "--cache_dir=" + (dir() / "c").string()},
          {"NEURON_CC", standin_compiler().string()},
          // These machines are no Trainium instances: say which target, as a user would.
          {"NEURON_PLATFORM_TARGET_OVERRIDE", "trn1"},
          {"PATH", bin_dir().string() + ":" + standin_dir().string() + ":" +
                       util::Environment::current().get("PATH").value_or("/usr/bin:/bin")},
          {"STANDIN_CC_STATE_DIR", (dir() / "standin-state").string()},
          {"STANDIN_CC_INVOCATION_LOG", invocation_log().string()},
          {"STANDIN_CC_BASE_MS", "1"},
          {"TMPDIR", dir().string()}};
  fs::create_directories(dir() / "standin-state");
}

std::size_t CacheTest::compiles() const { return count_lines(invocation_log()); }

std::size_t CacheTest::distinct_graphs_compiled() const {
  std::set<std::string> graphs;
  std::istringstream lines(read_text(invocation_log()));
  std::string pid, sha256, path;
  while (lines >> pid >> sha256 >> path) graphs.insert(sha256);
  return graphs.size();
}

std::vector<pid_t> CacheTest::compiler_pids() const {
  std::vector<pid_t> pids;
  std::istringstream lines(read_text(invocation_log()));
  for (std::string line; std::getline(lines, line);) {
    long pid = 0;
    if (std::istringstream(line) >> pid) pids.push_back(static_cast<pid_t>(pid));
  }
  return pids;
}

std::vector<fs::path> CacheTest::entries() const {
  std::vector<fs::path> found;
  fs::path version_dir = cache_root() / (std::string("neuronxcc-") + kStandinVersion);
  for (const auto& name : names_in(version_dir))
    if (name.starts_with("MODULE_")) found.push_back(version_dir / name);
  return found;
}

RunOptions CacheTest::options(std::map<std::string, std::string> extra) const {
  RunOptions o;
  o.set_env = env_;
  for (auto& [k, v] : extra) o.set_env[k] = v;
  o.cwd = dir();
  return o;
}

fs::path CacheTest::tool_path(const std::string& name) const {
  return name.starts_with("standin") || name == "neuronx-cc" ? standin_dir() / name : program(name);
}

RunResult CacheTest::run_tool(const std::string& name, std::vector<std::string> args,
                              std::map<std::string, std::string> extra_env) const {
  args.insert(args.begin(), tool_path(name).string());
  return run(args, options(std::move(extra_env)));
}

pid_t CacheTest::start_tool(const std::string& name, std::vector<std::string> args,
                            std::map<std::string, std::string> extra_env, const fs::path& output_file) const {
  args.insert(args.begin(), tool_path(name).string());
  return start_background(args, options(std::move(extra_env)), output_file);
}

pid_t CacheTest::start_tool_on_host(const std::string& host, const std::string& name, std::vector<std::string> args,
                                   std::map<std::string, std::string> extra_env, const fs::path& output_file) const {
  std::vector<std::string> argv = {"unshare", "--uts", "--pid", "--fork", "--mount-proc", "--", "/bin/sh", "-c",
                                   "hostname \"$0\" && echo \"host $(hostname) pid $$\" && exec \"$@\"", host,
                                   tool_path(name).string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return start_background(argv, options(std::move(extra_env)), output_file);
}

pid_t CacheTest::host_init(pid_t unshare_pid) {
  for (int tries = 0; tries < 500; ++tries) {
    if (auto children = children_of(unshare_pid); !children.empty()) return children.front();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

int train_total_field(const std::string& out, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("standin_train: total: .*\\b" + name + "=([0-9]+)"))) return -1;
  return std::stoi(m[1]);
}

} // namespace npc::test
