// Base fixture: every test gets its own fresh directory (mkdtemp) holding
// its graphs, outputs and captured process output, removed afterwards.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "process_runner.h"

namespace standin::test {

// Paths of the binaries under test, from the build system.
inline constexpr char kCompilerBinary[] = STANDIN_CC_BINARY;
inline constexpr char kTrainBinary[] = STANDIN_TRAIN_BINARY;

class StandinFixture : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  const std::string& dir() const { return dir_; }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // Writes `contents` to dir()/name and returns the full path.
  std::string write_file(const std::string& name, const std::string& contents) const;
  // Like write_file, and marks the file executable.
  std::string write_script(const std::string& name, const std::string& contents) const;
  std::string read_file(const std::string& path) const;
  bool exists(const std::string& path) const;
  std::vector<std::string> list_dir(const std::string& path) const;  // sorted names

  // Settings that make stand-in compiles take about a millisecond.
  static Env fast_compiler_env();

  ProcessResult run(const std::vector<std::string>& argv, const Env& env = {}) const {
    return run_process(argv, env, dir_);
  }
  // `neuronx-cc <args...>` with fast_compiler_env() plus `env`.
  ProcessResult run_compiler(const std::vector<std::string>& args, const Env& env = {}) const;
  Process start_compiler(const std::vector<std::string>& args, const Env& env = {}) const;

 private:
  std::string dir_;
};

// A graph of exactly `bytes` bytes that looks like HLO text.
std::string make_graph_text(std::size_t bytes, const std::string& tag = "");

std::vector<std::string> split_lines(const std::string& text);

// Value of the "<key>: " line of a stand-in NEFF header, or "" if absent.
std::string header_field(const std::string& neff, const std::string& key);

}  // namespace standin::test
