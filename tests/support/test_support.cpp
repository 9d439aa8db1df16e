#include "test_support.hpp"

#include <algorithm>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <sstream>
#include <unistd.h>

#include <npc/util/clock.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/process.hpp>

namespace npc::test {

fs::path bin_dir() { return NPC_BIN_DIR; }
fs::path standin_dir() { return NPC_STANDIN_DIR; }
fs::path source_dir() { return NPC_SOURCE_DIR; }
fs::path program(const std::string& name) { return bin_dir() / name; }
fs::path standin_compiler() { return standin_dir() / "neuronx-cc"; }

fs::path hlo_samples_dir() {
  fs::path dir = source_dir().parent_path() / "shared" / "hlo-samples";
  if (!fs::is_directory(dir)) ADD_FAILURE() << "missing " << dir << " (shared/ beside the project)";
  return dir;
}

std::string RunResult::describe() const {
  std::ostringstream s;
  if (timed_out) s << "TIMED OUT; ";
  if (signaled) s << "killed by signal " << signal;
  else s << "exit " << exit_code;
  s << "\n--- stdout ---\n" << out << "\n--- stderr ---\n" << err;
  return s.str();
}

RunResult run(const std::vector<std::string>& argv, const RunOptions& options) {
  util::Environment env = util::Environment::current();
  for (const auto& name : options.unset_env) env.unset(name);
  for (const auto& [name, value] : options.set_env) env.set(name, value);
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  util::SpawnOptions spawn;
  spawn.argv = argv;
  spawn.environment = env;
  spawn.working_dir = options.cwd;
  spawn.output = util::OutputTo::fds;
  spawn.stdout_fd = out_pipe[1];
  spawn.stderr_fd = err_pipe[1];
  auto child = util::spawn(spawn);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  RunResult result;
  if (!child) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    result.err = child.error();
    return result;
  }
  double deadline = util::monotonic_seconds() + static_cast<double>(options.timeout.count()) / 1000.0;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_count = 2;
  char buffer[65536];
  while (open_count > 0) {
    int left = static_cast<int>((deadline - util::monotonic_seconds()) * 1000);
    if (left <= 0) {
      result.timed_out = true;
      util::kill_process_group(child->pid, SIGKILL);
      break;
    }
    if (::poll(fds, 2, std::min(left, 1000)) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  auto status = util::wait_child(child->pid);
  result.signaled = status.signaled;
  result.signal = status.signal;
  result.exit_code = status.signaled ? -1 : status.code;
  return result;
}

std::string read_text(const fs::path& path) {
  auto text = util::read_file(path);
  return text ? *text : std::string();
}

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::size_t count_lines(const fs::path& path) {
  std::string text = read_text(path);
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

void TempDirTest::SetUp() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "." + info->name();
  std::replace(name.begin(), name.end(), '/', '_');
  fs::path base = fs::temp_directory_path() / "npc-tests";
  fs::create_directories(base);
  std::string pattern = (base / (name + ".XXXXXX")).string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  dir_ = pattern;
}

void TempDirTest::TearDown() {
  if (HasFailure()) {
    std::cerr << "test files kept in " << dir_ << "\n";
    return;
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void CacheTest::SetUp() {
  TempDirTest::SetUp();
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

std::vector<fs::path> CacheTest::entries() const {
  std::vector<fs::path> found;
  fs::path version_dir = cache_root() / (std::string("neuronxcc-") + kStandinVersion);
  std::error_code ec;
  for (fs::directory_iterator it(version_dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().starts_with("MODULE_")) found.push_back(it->path());
  std::sort(found.begin(), found.end());
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

pid_t start_background(const std::vector<std::string>& argv, const RunOptions& options,
                       const fs::path& output_file) {
  util::Environment env = util::Environment::current();
  for (const auto& name : options.unset_env) env.unset(name);
  for (const auto& [name, value] : options.set_env) env.set(name, value);
  util::SpawnOptions spawn;
  spawn.argv = argv;
  spawn.environment = env;
  spawn.working_dir = options.cwd;
  spawn.output = util::OutputTo::file;
  spawn.output_file = output_file;
  auto child = util::spawn(spawn);
  if (!child) throw std::runtime_error(child.error());
  return child->pid;
}

} // namespace npc::test
