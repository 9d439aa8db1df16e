#pragma once
// What we record next to an entry (npc-entry.json): the NEFF's integrity
// record and one record per compile attempt (how it ended, how long it took,
// its peak memory). Later scheduling learns compile costs from these.
// Also the reader and writer of compile_flags.json (a JSON array of strings).

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <npc/util/result.hpp>

namespace npc::cache {

namespace fs = std::filesystem;

// Whose words an entry's compile_flags.json holds, and so which command line
// hits the entry again.
enum class FlagsOrigin {
  // NEURON_CC_FLAGS's compiler flags: how torch-neuronx, neuron_cc_wrapper
  // and neuron_parallel_compile key a graph (every record before this field
  // was written, and every record without it).
  neuron_cc_flags,
  // The words a frontend gave `neuronx-cc compile` itself, which the
  // masquerade keys the compile by (compile/masquerade.hpp): only the same
  // command line hits such an entry, whatever NEURON_CC_FLAGS says.
  compiler_command_line
};

struct AttemptRecord {
  int attempt = 0;              // 1-based, counted over the entry's life
  std::string outcome{};        // "success", "failed", "timeout", "interrupted"
  std::string exit{};           // "exit code 0", "killed by signal SIGKILL"
  int exit_code = 0;
  std::string signal{};         // "SIGKILL" when killed by a signal, else ""
  double wall_seconds = 0;
  std::uint64_t peak_rss_bytes = 0;
  std::int64_t started_unix = 0;
  // Launchers that work as one (the tasks of a Slurm step) name their run
  // ("slurm step 4711.0"), the one that made the attempt ("task 1/4 vm") and
  // whether no retry of its own followed a failure (its last attempt): a
  // graph that failed for good in a run is failed for the whole run, not
  // compiled again by each of its launchers in turn (failed_for_good_in).
  // Empty and false in a record written outside such a run, or by an older
  // release.
  std::string run{};
  std::string by{};
  bool last = false;
  FlagsOrigin flags_from = FlagsOrigin::neuron_cc_flags; // the words this attempt compiled with
};

struct EntryMeta {
  std::optional<std::string> neff_sha256;
  std::optional<std::uint64_t> neff_bytes;
  std::uint64_t graph_bytes = 0;
  std::vector<AttemptRecord> attempts;

  // The last successful attempt, if any (its time and memory predict the next).
  [[nodiscard]] const AttemptRecord* last_success() const;
  // The entry's last attempt when it was made in `run`, failed or timed out
  // (not killed from outside), and was its launcher's last: the graph failed
  // for good in that run.
  [[nodiscard]] const AttemptRecord* failed_for_good_in(std::string_view run) const;
  // Whose words key the entry: its last attempt's (an entry no attempt of
  // ours compiled is the framework's, keyed by NEURON_CC_FLAGS).
  [[nodiscard]] FlagsOrigin flags_origin() const;
};

// A record is a few KiB; past this it is not one of ours.
inline constexpr std::uint64_t kMaxEntryMetaBytes = 16 * 1024 * 1024;

[[nodiscard]] Result<EntryMeta> parse_entry_meta(std::string_view json_text);
// How an attempt failed a graph for good in its run, for another launcher
// of the run: "timed out after 3s in task 1/4 vm (slurm step 4711.0)",
// "compiler exit code 70 in task 1/4 vm (slurm step 4711.0)".
[[nodiscard]] std::string describe_run_failure(const AttemptRecord& failed);

[[nodiscard]] std::string serialize_entry_meta(const EntryMeta& meta);
// A missing file is an empty record (an entry written by another tool).
[[nodiscard]] Result<EntryMeta> read_entry_meta(const fs::path& entry_dir);
[[nodiscard]] Status write_entry_meta(const fs::path& entry_dir, const EntryMeta& meta);

[[nodiscard]] Result<std::vector<std::string>> parse_compile_flags(std::string_view json_text);
[[nodiscard]] std::string serialize_compile_flags(const std::vector<std::string>& flags);
[[nodiscard]] Result<std::vector<std::string>> read_compile_flags(const fs::path& entry_dir);
// Whether a compile_flags.json text holds flags whose hash (key.hpp's
// flags_hash) is `hash`: then any entry whose key names that hash has these
// flags, and the text can stand in for its own.
[[nodiscard]] bool compile_flags_hash_to(std::string_view json_text, std::string_view hash);

} // namespace npc::cache
