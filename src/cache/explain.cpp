#include <npc/cache/explain.hpp>

#include <algorithm>
#include <iterator>
#include <set>
#include <utility>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/same_graph.hpp>
#include <npc/cache/store.hpp>
#include <npc/util/sha256.hpp>

namespace npc::cache {

namespace {

std::vector<std::string> sorted(std::vector<std::string> words) {
  std::sort(words.begin(), words.end());
  return words;
}

// What is in `a` and not in `b`, each word as many times as it is in excess.
std::vector<std::string> excess(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// An entry that holds the graph, compared with the command line that keys it.
GraphMatch match_of(EntryInfo entry, const CurrentSettings& current) {
  GraphMatch m;
  if (auto flags = read_compile_flags(entry.dir)) m.flags = std::move(*flags);
  // A record that cannot be read says nothing of who made the entry: it is
  // taken as keyed by NEURON_CC_FLAGS, as every entry before the record said.
  if (auto meta = read_entry_meta(entry.dir)) m.flags_from = meta->flags_origin();
  const std::vector<std::string> entry_flags = m.flags.value_or(std::vector<std::string>{});
  if (m.flags_from == FlagsOrigin::neuron_cc_flags) {
    m.flags_diff = diff_flags(entry_flags, current.flags);
  } else {
    // Its words are a compiler command line's: NEURON_CC_FLAGS never reach
    // it. Compared with the command line given, or else with the same
    // command line again.
    m.flags_diff = diff_flags(entry_flags, current.command_line_flags.value_or(entry_flags));
    if (current.command_line_graph_hash)
      m.named_files_changed = entry.key.graph_hash != *current.command_line_graph_hash;
  }
  if (current.compiler_version) m.same_version = entry.key.compiler_version == *current.compiler_version;
  m.entry = std::move(entry);
  return m;
}

// The first done match keyed by `origin` with the same settings (a hit), or
// else the first such match that is not done.
Judgement judge(const std::vector<GraphMatch>& matches, FlagsOrigin origin) {
  Judgement j;
  for (std::size_t i = 0; i < matches.size(); ++i) {
    if (matches[i].flags_from != origin || !matches[i].same_settings()) continue;
    if (matches[i].entry.state == EntryState::done) return {Verdict::hit, i};
    if (!j.deciding) j = {Verdict::not_done, i};
  }
  return j;
}

// The entry's place in the cache, however its root was spelled.
std::pair<std::string, std::string> place(const CacheKey& key) { return {key.compiler_version, key.module_name()}; }

} // namespace

FlagsDiff diff_flags(const std::vector<std::string>& entry_flags, const std::vector<std::string>& current_flags) {
  FlagsDiff diff;
  auto entry_words = sorted(entry_flags);
  auto current_words = sorted(current_flags);
  diff.added = excess(current_words, entry_words);
  diff.removed = excess(entry_words, current_words);
  diff.same = joined_flags(entry_flags) == joined_flags(current_flags);
  return diff;
}

Result<Explanation> explain_graph(std::vector<EntryInfo> entries, const fs::path& graph,
                                  const CurrentSettings& current) {
  auto digest = util::sha256_file(graph);
  if (!digest) return fail(digest.error());
  Explanation x;
  x.graph = graph;
  x.graph_bytes = digest->size;
  x.graph_sha256 = digest->sha256;
  x.current = current;
  std::optional<CacheKey> named;
  if (graph.filename() == kGraphFile) named = parse_key(graph.parent_path().string());
  if (current.compiler_version) {
    if (named) {
      x.current_key = CacheKey{*current.compiler_version, named->graph_hash, flags_hash(current.flags)};
      x.current_key_source = KeySource::entry;
    } else {
      x.current_key = make_key(digest->sha256, current.flags, *current.compiler_version);
      x.current_key_source = KeySource::wrapper;
    }
  }
  SameGraphIndex index(std::move(entries));
  for (auto& entry : index.find(digest->size, digest->sha256)) {
    x.matches.push_back(match_of(std::move(entry), current));
  }
  const Judgement by_neuron_cc_flags = judge(x.matches, FlagsOrigin::neuron_cc_flags);
  x.verdict = by_neuron_cc_flags.verdict;
  x.deciding = by_neuron_cc_flags.deciding;
  const bool made_by_masquerade = std::any_of(x.matches.begin(), x.matches.end(), [](const GraphMatch& m) {
    return m.flags_from == FlagsOrigin::compiler_command_line;
  });
  if (current.command_line_flags || made_by_masquerade)
    x.command_line = judge(x.matches, FlagsOrigin::compiler_command_line);
  if (current.command_line_flags && current.command_line_graph_hash && current.compiler_version)
    x.command_line_key =
        make_key(*current.command_line_graph_hash, *current.command_line_flags, *current.compiler_version);
  return x;
}

SeenElsewhere compiled_graphs_seen_elsewhere(std::vector<EntryInfo> entries, const std::vector<fs::path>& compiled_dirs) {
  SeenElsewhere seen;
  std::vector<std::pair<fs::path, CacheKey>> compiled;
  std::set<std::pair<std::string, std::string>> compiled_places;
  for (const auto& dir : compiled_dirs)
    if (auto key = parse_key(dir.string())) {
      compiled.emplace_back(dir, *key);
      compiled_places.insert(place(*key));
    }
  if (compiled.empty()) return seen;
  // This run's own entries stay out of the index: left in, each would make
  // its own graph's size a candidate and have it hashed for nothing.
  std::erase_if(entries, [&](const EntryInfo& e) { return compiled_places.contains(place(e.key)); });
  SameGraphIndex index(std::move(entries));
  for (const auto& [dir, key] : compiled) {
    auto found = index.find(dir / kGraphFile);
    if (!found) continue;
    bool elsewhere = std::any_of(found->begin(), found->end(), [&, &key = key](const EntryInfo& e) {
      return e.key.flags_hash != key.flags_hash || e.key.compiler_version != key.compiler_version;
    });
    if (!elsewhere) continue;
    ++seen.graphs;
    if (!seen.example) seen.example = dir;
  }
  return seen;
}

} // namespace npc::cache
