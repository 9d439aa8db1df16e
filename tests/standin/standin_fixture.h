// Base fixture of the stand-in tests: a temp directory per test from the
// support library (kept when the test fails), holding the graphs, outputs and
// captured output of the stand-in programs it runs.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace standin::test {

using Env = std::map<std::string, std::string>;
using npc::test::Child;
using npc::test::RunResult;

// A stand-in run that takes longer is broken: it fails its test.
inline constexpr std::chrono::milliseconds kStandinTimeout{20'000};

// Paths of the binaries under test.
inline const std::string kCompilerBinary = npc::test::standin_compiler().string();
inline const std::string kTrainBinary = npc::test::standin_train_script().string();

class StandinFixture : public npc::test::TempDirTest {
 protected:
  std::string path(const std::string& name) const { return (dir() / name).string(); }
  // Writes `contents` to dir()/name and returns the full path.
  std::string write_file(const std::string& name, const std::string& contents) const;
  // Like write_file, and marks the file executable.
  std::string write_script(const std::string& name, const std::string& contents) const;
  std::string read_file(const std::string& file) const { return npc::test::read_text(file); }
  bool exists(const std::string& file) const;
  std::vector<std::string> list_dir(const std::string& directory) const { return npc::test::names_in(directory); }

  // Settings that make stand-in compiles take about a millisecond.
  static Env fast_compiler_env();

  // argv in the test environment (no STANDIN_*, NEURON_* or torchrun
  // variables from the developer's shell) plus `env`.
  RunResult run(const std::vector<std::string>& argv, const Env& env = {}) const;
  Child start(const std::vector<std::string>& argv, const Env& env = {}) const;
  // `neuronx-cc <args...>` with fast_compiler_env() plus `env`.
  RunResult run_compiler(const std::vector<std::string>& args, const Env& env = {}) const;
  Child start_compiler(const std::vector<std::string>& args, const Env& env = {}) const;

 private:
  npc::test::RunOptions options(const Env& env) const;
  std::string next_capture_stem() const;
  mutable int captures_ = 0;
};

// The size of the graphs most tests compile: small, so a compile is quick.
inline constexpr std::size_t kGraphBytes = 1000;

// A graph of exactly `bytes` bytes that looks like HLO text.
std::string make_graph_text(std::size_t bytes, const std::string& tag = "");

std::vector<std::string> split_lines(const std::string& text);
// The lines of `text` that contain `needle`.
std::vector<std::string> lines_with(const std::string& text, const std::string& needle);

// Value of the "<key>: " line of a stand-in NEFF header, or "" if absent.
std::string header_field(const std::string& neff, const std::string& key);

}  // namespace standin::test
