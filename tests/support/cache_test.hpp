#pragma once
// A test with a cache and the stand-in compiler set up in the environment of
// the programs it runs, and readers of what the stand-ins leave behind.

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "process.hpp"
#include "temp_dir.hpp"

namespace npc::test {

inline constexpr const char* kStandinVersion = "2.14.213.0+standin";

// A TempDirTest whose programs see NEURON_CC_FLAGS=--cache_dir=<dir>/c,
// NEURON_CC=<stand-in>, PATH with build/bin and build/standin first, a
// state dir and an invocation log for the stand-in.
class CacheTest : public TempDirTest {
protected:
  void SetUp() override;
  [[nodiscard]] fs::path cache_root() const { return dir() / "c"; } // --cache_dir=DIR: DIR is the root
  [[nodiscard]] fs::path invocation_log() const { return dir() / "invocations.log"; }
  [[nodiscard]] std::size_t compiles() const;
  // How many distinct graphs (by the SHA-256 the stand-in logs) were
  // compiled: with compiles(), whether any graph was compiled twice.
  [[nodiscard]] std::size_t distinct_graphs_compiled() const;
  // Pids of the stand-in compilers that ran, one per compile, from the log.
  [[nodiscard]] std::vector<pid_t> compiler_pids() const;
  // Entry directories of the stand-in's compiler version, sorted.
  [[nodiscard]] std::vector<fs::path> entries() const;
  RunOptions options(std::map<std::string, std::string> extra = {}) const;
  RunResult run_tool(const std::string& name, std::vector<std::string> args,
                     std::map<std::string, std::string> extra_env = {}) const;
  pid_t start_tool(const std::string& name, std::vector<std::string> args,
                   std::map<std::string, std::string> extra_env, const fs::path& output_file) const;
  // As start_tool, on a host of its own: in a UTS and a PID namespace
  // (`unshare --uts --pid --fork --mount-proc`, as root) named `host`, so its
  // hostname differs from every other host's and its pids collide with
  // theirs, as on a cluster. The output starts with "host HOST pid 1".
  pid_t start_tool_on_host(const std::string& host, const std::string& name, std::vector<std::string> args,
                           std::map<std::string, std::string> extra_env, const fs::path& output_file) const;
  // The first process of the PID namespace of a host start_tool_on_host
  // started (its `unshare` pid): the namespace's pid 1, whose SIGKILL takes
  // every process of the host with it, as a power loss; 0 if none came.
  [[nodiscard]] static pid_t host_init(pid_t unshare_pid);
  [[nodiscard]] fs::path tool_path(const std::string& name) const;
  std::map<std::string, std::string> env_;
};

// The value of `name=N` on the stand-in training script's
// "standin_train: total: ..." line; -1 when there is none.
[[nodiscard]] int train_total_field(const std::string& out, const std::string& name);

} // namespace npc::test
