#include "reliability.hpp"

#include <csignal>
#include <fcntl.h>
#include <iostream>
#include <sstream>
#include <sys/file.h>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <npc/util/fs.hpp>
#include <npc/util/process.hpp>
#include <npc/util/sha256.hpp>
#include <npc/util/strings.hpp>

namespace npc::reltest {

using npc::test::names_in;
using npc::test::RunOptions;

bool long_mode() { return util::is_truthy(util::env("NPC_LONG").value_or("")); }

int scaled(int short_count, int long_count) { return long_mode() ? long_count : short_count; }

std::uint64_t test_seed() {
  std::uint64_t seed = 0;
  if (auto text = util::env("NPC_SEED"); text && !text->empty()) {
    seed = std::stoull(*text);
  } else {
    std::random_device device;
    seed = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  }
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::cout << "[ seed     ] " << info->test_suite_name() << "." << info->name() << " NPC_SEED=" << seed
            << (long_mode() ? " (long form)" : " (short form)") << std::endl;
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

void record_figures(const std::map<std::string, std::uint64_t>& figures) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  nlohmann::json line = {{"test", std::string(info->test_suite_name()) + "." + info->name()},
                         {"form", long_mode() ? "long" : "short"}};
  for (const auto& [name, value] : figures) {
    line[name] = value;
    ::testing::Test::RecordProperty(name, std::to_string(value));
  }
  std::cout << "[ figures  ] " << line.dump() << std::endl;
  fs::path file = util::env("NPC_RELIABILITY_FIGURES")
                      .value_or((npc::test::bin_dir().parent_path() / "reliability-figures.jsonl").string());
  std::ignore = util::append_line(file, line.dump());
}

// ---- Graphs -----------------------------------------------------------------

std::string reference_neff_sha(const fs::path& graph, const fs::path& workdir) {
  fs::create_directories(workdir);
  fs::path out = workdir / (graph.filename().string() + ".ref.neff");
  RunOptions options;
  // Instant, fault-free, and not counted by any invocation log.
  options.set_env = {{"STANDIN_CC_BASE_MS", "0"}, {"STANDIN_CC_BYTES_PER_SEC", "1000000000000"}};
  options.unset_env = {"STANDIN_CC_INVOCATION_LOG", "STANDIN_CC_FAULT", "STANDIN_CC_FAULT_TIMES",
                       "STANDIN_CC_FAULT_MATCH", "STANDIN_CC_MEMORY_BUDGET", "STANDIN_CC_MEMORY_LEDGER",
                       "STANDIN_CC_MEM_PER_GRAPH_BYTE"};
  auto r = npc::test::run({npc::test::standin_compiler().string(), "compile", "--framework=XLA",
                           graph.string(), "--output", out.string(), "--target=trn1"},
                          options);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  return file_sha256(out);
}

std::vector<Graph> make_graphs(const fs::path& dir, const std::string& tag, int count, std::size_t bytes,
                               std::mt19937_64& rng) {
  fs::create_directories(dir);
  std::vector<Graph> graphs;
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < count; ++i) {
    std::ostringstream text;
    text << "HloModule " << tag << "_" << i << "\n\n"
         << "ENTRY main {\n  p0 = f32[" << (i + 1) << ",128] parameter(0)\n"
         << "  ROOT r = f32[" << (i + 1) << ",128] add(p0, p0)\n}\n";
    std::string body = text.str();
    body += "// padding:";
    while (body.size() + 1 < bytes) body.push_back(kHex[rng() % 16]);
    body.push_back('\n');
    Graph g;
    g.path = dir / (tag + "-" + std::to_string(i) + ".hlo");
    npc::test::write_text(g.path, body);
    g.sha256 = util::sha256_hex(body);
    fs::path ref = dir / ".ref";
    g.neff_sha256 = reference_neff_sha(g.path, ref);
    g.neff_bytes = fs::file_size(ref / (g.path.filename().string() + ".ref.neff"));
    graphs.push_back(std::move(g));
  }
  return graphs;
}

std::map<std::string, std::string> expected_map(const std::vector<Graph>& graphs) {
  std::map<std::string, std::string> m;
  for (const auto& g : graphs) m[g.sha256] = g.neff_sha256;
  return m;
}

// ---- The oracle -------------------------------------------------------------

std::string CacheCheck::describe() const {
  std::ostringstream s;
  s << entries << " entries (" << done << " done, " << pending << " pending, " << failed << " failed, "
    << incomplete << " incomplete), " << lock_files << " lock files (" << held_locks << " held), "
    << temp_files << " temp files, " << trash << " in trash";
  for (const auto& p : problems) s << "\n  PROBLEM: " << p;
  return s.str();
}

namespace {

bool exists_nofollow(const fs::path& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec));
}

// Held by someone: a non-blocking exclusive flock fails.
bool lock_held(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
  ::close(fd);
  return held;
}

} // namespace

CacheCheck check_cache(const fs::path& root, const std::map<std::string, std::string>& expected,
                       bool expect_no_holders) {
  CacheCheck check;
  check.trash = names_in(root / ".npc" / "trash").size();
  if (exists_nofollow(root / ".npc" / "eviction.lock")) {
    ++check.lock_files;
    if (lock_held(root / ".npc" / "eviction.lock")) {
      ++check.held_locks;
      if (expect_no_holders) check.problems.push_back("eviction lock held with nothing running");
    }
  }
  for (const auto& version : names_in(root)) {
    if (!version.starts_with("neuronxcc-")) continue;
    for (const auto& module : names_in(root / version)) {
      if (!module.starts_with("MODULE_")) continue;
      fs::path dir = root / version / module;
      std::string where = version + "/" + module;
      std::error_code ec;
      if (!fs::is_directory(fs::symlink_status(dir, ec))) {
        ++check.incomplete; // garbage where an entry should be: never served
        continue;
      }
      ++check.entries;
      for (const auto& name : names_in(dir))
        if (name.starts_with(".tmp-")) ++check.temp_files;
      // The entry's lock as current releases take it: counted, not judged
      // (a record of who took it, whose holder this host may not see).
      if (exists_nofollow(dir / "model.hlo_module.pb.lock")) ++check.lock_files;
      if (exists_nofollow(dir / "npc-compile.lock")) {
        ++check.lock_files;
        if (lock_held(dir / "npc-compile.lock")) {
          ++check.held_locks;
          if (expect_no_holders) check.problems.push_back(where + ": lock held with nothing running");
        }
      }
      bool has_done = exists_nofollow(dir / "model.done");
      bool has_graph = fs::is_regular_file(dir / "model.hlo_module.pb", ec);
      bool has_log = exists_nofollow(dir / "model.log");
      if (!has_done) {
        if (has_log) ++check.failed;
        else if (has_graph) ++check.pending;
        else ++check.incomplete;
        continue;
      }
      // A done entry: everything a reader will be served must be whole.
      if (!fs::exists(dir, ec)) continue; // evicted while we looked
      ++check.done;
      if (!has_graph) check.problems.push_back(where + ": done without its graph (half deleted?)");
      if (!exists_nofollow(dir / "compile_flags.json"))
        check.problems.push_back(where + ": done without compile_flags.json (half deleted?)");
      fs::path neff = dir / "model.neff";
      if (!fs::is_regular_file(neff, ec)) {
        check.problems.push_back(where + ": done without a NEFF");
        continue;
      }
      std::string neff_sha = file_sha256(neff);
      std::uint64_t neff_size = fs::file_size(neff, ec);
      auto meta_text = util::read_file(dir / "npc-entry.json");
      if (!meta_text) {
        check.problems.push_back(where + ": done without npc-entry.json");
        continue;
      }
      auto meta = nlohmann::json::parse(*meta_text, nullptr, false);
      if (meta.is_discarded() || !meta.contains("neff") || !meta["neff"].is_object() ||
          !meta["neff"].contains("sha256") || !meta["neff"].contains("bytes")) {
        check.problems.push_back(where + ": done, but npc-entry.json has no NEFF record: " + *meta_text);
        continue;
      }
      if (meta["neff"]["sha256"] != neff_sha || meta["neff"]["bytes"] != neff_size)
        check.problems.push_back(where + ": NEFF (" + std::to_string(neff_size) + " bytes, " + neff_sha +
                                 ") fails its integrity record " + meta["neff"].dump());
      if (has_graph) {
        auto it = expected.find(file_sha256(dir / "model.hlo_module.pb"));
        if (it != expected.end() && it->second != neff_sha)
          check.problems.push_back(where + ": NEFF " + neff_sha + " is not the graph's NEFF " + it->second);
      }
    }
  }
  return check;
}

// ---- Processes --------------------------------------------------------------

Started start(const std::vector<std::string>& argv, const RunOptions& options, const fs::path& output) {
  try {
    return {npc::test::start_background(argv, options, output), output};
  } catch (const std::exception& e) {
    ADD_FAILURE() << "cannot start " << argv.front() << ": " << e.what();
    return {};
  }
}

namespace {
Ended finish(const Started& started, const util::ExitStatus& status, bool we_killed) {
  Ended ended;
  ended.signaled = status.signaled;
  ended.signal = status.signal;
  ended.exit_code = status.signaled ? -1 : status.code;
  ended.killed = we_killed && status.signaled && status.signal == SIGKILL;
  ended.output = npc::test::read_text(started.output);
  return ended;
}
} // namespace

Ended kill_after(const Started& started, std::chrono::microseconds delay) {
  if (started.pid <= 0) return {};
  auto deadline = std::chrono::steady_clock::now() + delay;
  // Poll finely so a process that ends early is seen as ending by itself.
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto status = util::try_wait_child(started.pid)) return finish(started, *status, false);
    auto left = deadline - std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(left, std::chrono::microseconds(500)));
  }
  if (auto status = util::try_wait_child(started.pid)) return finish(started, *status, false);
  util::kill_process_group(started.pid, SIGKILL);
  std::ignore = ::kill(started.pid, SIGKILL);
  return finish(started, util::wait_child(started.pid), true);
}

Ended wait_for(const Started& started, std::chrono::milliseconds timeout) {
  if (started.pid <= 0) return {};
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto status = util::try_wait_child(started.pid)) return finish(started, *status, false);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ADD_FAILURE() << "process " << started.pid << " did not end within " << timeout.count() << " ms";
  util::kill_process_group(started.pid, SIGKILL);
  return finish(started, util::wait_child(started.pid), false);
}

} // namespace npc::reltest
