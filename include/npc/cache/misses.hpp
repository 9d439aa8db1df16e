#pragma once
// The graphs compiled after a pre-compile, each with why the pre-compile did
// not cover it (`neuron_cache misses`): every entry of the cache whose graph
// was written after a time, whoever made it (the framework itself, the
// wrapper, the masquerade, another launcher), against the graphs the last
// pre-compile's trial produced (precompile_record.hpp).
//
// An entry is made when its graph is first stored, so its graph file's time
// is when the entry was made. The causes, judged on keys alone
// (neuronxcc-<version>/MODULE_<graph>+<flags>; the framework names the same
// graph alike under any flags and version):
//   not_in_trial            no graph of the trial has this graph part; the
//                           trial's graph nearest it is found by reading
//                           both (nearest_graph.hpp)
//   other_flags             the trial's graph, under other compiler flags
//   other_compiler_version  the trial's graph, under another compiler version
//   failed_in_precompile    this very key failed in the pre-compile
//   made_again              this very key the pre-compile had done: its
//                           entry was evicted or removed since
//   no_precompile           no pre-compile is recorded to compare with

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <npc/cache/entry.hpp>
#include <npc/cache/key.hpp>
#include <npc/cache/precompile_record.hpp>
#include <npc/util/clock.hpp>

namespace npc::cache {

class Cache;

enum class MissCause {
  not_in_trial,
  other_flags,
  other_compiler_version,
  failed_in_precompile,
  made_again,
  no_precompile
};
inline constexpr std::size_t kMissCauses = 6;

// "not_in_trial", ... (the JSON's words).
[[nodiscard]] std::string_view to_string(MissCause cause);
// "never produced by the trial", ... (the listing's headings).
[[nodiscard]] std::string_view describe(MissCause cause);

struct Miss {
  CacheKey key;
  MissCause cause = MissCause::not_in_trial;
  EntryState state = EntryState::pending; // now
  util::WallTime written;                 // its graph's time: when the entry was made
  // The trial's graph it differs from: other_flags, other_compiler_version
  // (the nearest: the same version first), the key itself for
  // failed_in_precompile and made_again, and for not_in_trial the trial's
  // graph nearest it (nearest_graph.hpp; none when no trial graph is left
  // to read).
  std::optional<CacheKey> trial_key;
  // not_in_trial: what differs from that nearest graph, and the likely
  // cause; or why this graph could not be decoded.
  std::vector<std::string> differences;
  std::string hint;
  std::string undecodable;
  // other_flags: the words of this entry's flags not in the trial's, and
  // the other way round (empty when either cannot be read).
  std::vector<std::string> flags_added;
  std::vector<std::string> flags_removed;
};

struct Misses {
  std::vector<PrecompileRecord> precompile; // the last pre-compile's records; empty: none
  util::WallTime since;
  std::size_t looked_at = 0;  // entries whose time was read
  std::vector<Miss> misses;   // by cause, then by time
};

// The entries of `cache` whose graphs were written after `since` (less the
// pre-compile's own: its graphs written by its end), judged
// against `precompile` (last_precompile's records; may be empty). Fails
// when the cache cannot be listed.
[[nodiscard]] Result<Misses> find_misses(const Cache& cache, std::vector<PrecompileRecord> precompile, util::WallTime since);

// Every key of `cache`: one listing of its root and one of each compiler
// version's folder. A root that cannot be listed is an error (an empty
// answer would pass for a cache with nothing in it); a version folder that
// cannot be listed is skipped with a warning.
[[nodiscard]] Result<std::vector<CacheKey>> list_keys(const Cache& cache);

// An entry of the same graph as another key (the same graph part), under
// other flags or another compiler version.
struct SameGraphKey {
  CacheKey key;
  bool same_version = false;
  // Other flags: the words of `key`'s flags not in the asked key's, and the
  // other way round (empty when either cannot be read).
  std::vector<std::string> flags_added;
  std::vector<std::string> flags_removed;
};
// The keys of `keys` other than `key` with its graph part, the nearest
// first: under its compiler version, the fewest flag words apart; `key`'s
// own flags are read from `cache`.
[[nodiscard]] std::vector<SameGraphKey> same_graph_keys(const Cache& cache, const std::vector<CacheKey>& keys,
                                                        const CacheKey& key);

} // namespace npc::cache
