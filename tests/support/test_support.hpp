#pragma once
// What every test suite shares: a fresh temp directory per test (kept when
// the test fails, for a look), running our programs and capturing what they
// print, and where the binaries are.

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace npc::test {

namespace fs = std::filesystem;

fs::path bin_dir();     // build/bin: neuron_parallel_compile, neuron_cc_wrapper, neuron_cache
fs::path standin_dir(); // build/standin: neuronx-cc, standin_train
fs::path source_dir();
fs::path program(const std::string& name); // bin_dir()/name
fs::path standin_compiler();               // standin_dir()/neuronx-cc
fs::path hlo_samples_dir();                // ../shared/hlo-samples (skips the test if absent)

struct RunResult {
  int exit_code = -1;  // when !signaled
  int signal = 0;      // when signaled
  bool signaled = false;
  bool timed_out = false;
  std::string out;
  std::string err;
  [[nodiscard]] std::string describe() const; // for assertion messages
};

struct RunOptions {
  std::map<std::string, std::string> set_env;   // added to (or replacing in) ours
  std::vector<std::string> unset_env;
  std::optional<fs::path> cwd;
  std::chrono::milliseconds timeout{60000};
};

// Runs argv (no shell), stdin from /dev/null, stdout and stderr captured.
RunResult run(const std::vector<std::string>& argv, const RunOptions& options = {});

// Starts argv in the background in its own process group, stdout and stderr
// to `output_file`; the caller waits for it (util::wait_child).
pid_t start_background(const std::vector<std::string>& argv, const RunOptions& options,
                       const fs::path& output_file);

std::string read_text(const fs::path& path);
void write_text(const fs::path& path, const std::string& text);
std::size_t count_lines(const fs::path& path); // 0 when missing

// Each test gets dir(): removed after a pass, kept (and named) after a failure.
class TempDirTest : public ::testing::Test {
protected:
  void SetUp() override;
  void TearDown() override;
  [[nodiscard]] const fs::path& dir() const { return dir_; }

private:
  fs::path dir_;
};

// A TempDirTest with a cache and the stand-in compiler set up in the
// environment of the programs it runs: NEURON_CC_FLAGS=--cache_dir=<dir>/c,
// NEURON_CC=<stand-in>, PATH with build/bin and build/standin first, a
// state dir and an invocation log for the stand-in.
class CacheTest : public TempDirTest {
protected:
  void SetUp() override;
  [[nodiscard]] fs::path cache_root() const { return dir() / "c"; } // --cache_dir=DIR: DIR is the root
  [[nodiscard]] fs::path invocation_log() const { return dir() / "invocations.log"; }
  [[nodiscard]] std::size_t compiles() const { return count_lines(invocation_log()); }
  // Entry directories of the stand-in's compiler version, sorted.
  [[nodiscard]] std::vector<fs::path> entries() const;
  RunOptions options(std::map<std::string, std::string> extra = {}) const;
  RunResult run_tool(const std::string& name, std::vector<std::string> args,
                     std::map<std::string, std::string> extra_env = {}) const;
  pid_t start_tool(const std::string& name, std::vector<std::string> args,
                   std::map<std::string, std::string> extra_env, const fs::path& output_file) const;
  [[nodiscard]] fs::path tool_path(const std::string& name) const;
  std::map<std::string, std::string> env_;
};

inline constexpr const char* kStandinVersion = "2.14.213.0+standin";

} // namespace npc::test
