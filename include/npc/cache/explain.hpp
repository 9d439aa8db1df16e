#pragma once
// Why a run would compile a graph again: the entries that hold the same graph
// bytes (same_graph.hpp), and how each differs from the current compiler
// flags and compiler version. The words are the CLI's (neuron_cache explain);
// this file gives the facts.
//
// An entry is compared with the command line that keys it (its record,
// entry_meta.hpp's FlagsOrigin): one keyed by NEURON_CC_FLAGS (torch-neuronx,
// neuron_cc_wrapper, neuron_parallel_compile) with the current
// NEURON_CC_FLAGS; one the masquerade made, keyed by the words a frontend
// gave `neuronx-cc compile`, never with NEURON_CC_FLAGS (they do not reach
// it), but with a neuronx-cc command line when one is given, and otherwise
// only as to whether the same command line would hit it again.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <npc/cache/entry.hpp>
#include <npc/cache/entry_meta.hpp>
#include <npc/cache/key.hpp>
#include <npc/util/result.hpp>

namespace npc::cache {

namespace fs = std::filesystem;

class Cache;

// Flags as words. The key hashes the flags joined by spaces, so order counts
// for a hit, while the words added and removed are counted as multisets.
struct FlagsDiff {
  std::vector<std::string> added;   // in the current flags, not in the entry's (sorted)
  std::vector<std::string> removed; // in the entry's, not in the current flags (sorted)
  bool same = false;                // they join to the same text: the same key
  [[nodiscard]] bool order_only() const { return !same && added.empty() && removed.empty(); }
};
[[nodiscard]] FlagsDiff diff_flags(const std::vector<std::string>& entry_flags,
                                   const std::vector<std::string>& current_flags);

struct CurrentSettings {
  std::optional<std::string> compiler_version; // nullopt: the compiler cannot be found
  std::vector<std::string> flags;              // compiler flags only, as the wrapper keys them
  // The words of a `neuronx-cc compile` command line the user gave, as the
  // masquerade keys them (compile/masquerade.hpp's key_flags); nullopt: none.
  std::optional<std::vector<std::string>> command_line_flags{};
  // The graph part of the key the masquerade would give this graph now: its
  // bytes and those of the files it names (compile/masquerade.hpp's
  // key_sha256, cut as the key cuts it); nullopt: unknown.
  std::optional<std::string> command_line_graph_hash{};
};

struct GraphMatch {
  EntryInfo entry;
  FlagsOrigin flags_from = FlagsOrigin::neuron_cc_flags; // whose words key it (its record)
  std::optional<std::vector<std::string>> flags; // nullopt: compile_flags.json unreadable
  // Against the flags of the command line that keys it: NEURON_CC_FLAGS's,
  // or a given neuronx-cc command line's, or (a masquerade's entry, no
  // command line given) the same command line again; against no flags when
  // `flags` is unknown.
  FlagsDiff flags_diff;
  std::optional<bool> same_version;              // nullopt: the current version is unknown
  // A masquerade's entry whose graph part is not what the masquerade would
  // key this graph by now: the files the graph names have changed since.
  bool named_files_changed = false;
  // What a run of the command line that keys it would use: the current
  // settings, or for a masquerade's entry, the given command line or (none
  // given) the same command line again (the version is not looked at when
  // it is unknown).
  [[nodiscard]] bool same_settings() const {
    return flags && flags_diff.same && same_version.value_or(true) && !named_files_changed;
  }
};

enum class Verdict {
  hit,      // an entry with the same settings is done
  not_done, // there is one, but pending, failed, locked or incomplete
  miss      // no entry has this graph under the current settings
};

// Where the graph part of the current key comes from. Nobody outside the
// framework can compute its graph part from the bytes (torch-xla's decimal
// hash, NxD's own): a graph named by its entry keeps that entry's graph part
// (the framework names the same graph alike), a graph file alone gets the
// key neuron_cc_wrapper compile would use.
enum class KeySource { entry, wrapper };

// Which entry a run would use, of those keyed by its kind of command line.
struct Judgement {
  Verdict verdict = Verdict::miss;
  std::optional<std::size_t> deciding; // the match the verdict is about (hit, not_done)
};

struct Explanation {
  fs::path graph;
  std::uint64_t graph_bytes = 0;
  std::string graph_sha256;
  CurrentSettings current;
  // The current version's directory, the current flags' part, and a graph
  // part as `current_key_source` says; nullopt when the version is unknown.
  std::optional<CacheKey> current_key;
  KeySource current_key_source = KeySource::wrapper;
  std::vector<GraphMatch> matches;     // in key order
  // A run keyed by the current NEURON_CC_FLAGS, over the entries so keyed.
  Verdict verdict = Verdict::miss;
  std::optional<std::size_t> deciding; // the match the verdict is about (hit, not_done)
  // A neuronx-cc command line through the masquerade, over the entries it
  // made: the given one's, or (none given) the same command line as a done
  // entry's. nullopt: no command line given and no such entry.
  std::optional<Judgement> command_line;
  // The key the given command line would give this graph, when its version
  // and graph part are known.
  std::optional<CacheKey> command_line_key;
};

// Compares `graph` with the graphs of `entries` (a cache's listing).
// Fails when the graph cannot be read.
[[nodiscard]] Result<Explanation> explain_graph(std::vector<EntryInfo> entries, const fs::path& graph,
                                                const CurrentSettings& current);

// For the end of a launcher run: how many of the entries it compiled hold a
// graph that another entry (another flags hash or compiler version) already
// held, byte for byte. Only graphs whose size some other entry has are hashed.
struct SeenElsewhere {
  std::size_t graphs = 0;
  std::optional<fs::path> example; // one such compiled entry's directory
};
[[nodiscard]] SeenElsewhere compiled_graphs_seen_elsewhere(std::vector<EntryInfo> entries,
                                                           const std::vector<fs::path>& compiled_dirs);

} // namespace npc::cache
