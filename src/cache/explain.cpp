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
    GraphMatch m;
    if (auto flags = read_compile_flags(entry.dir)) m.flags = std::move(*flags);
    m.flags_diff = diff_flags(m.flags.value_or(std::vector<std::string>{}), current.flags);
    if (current.compiler_version) m.same_version = entry.key.compiler_version == *current.compiler_version;
    m.entry = std::move(entry);
    x.matches.push_back(std::move(m));
  }
  for (std::size_t i = 0; i < x.matches.size(); ++i) {
    if (!x.matches[i].same_settings()) continue;
    if (x.matches[i].entry.state == EntryState::done) {
      x.verdict = Verdict::hit;
      x.deciding = i;
      break;
    }
    if (!x.deciding) {
      x.verdict = Verdict::not_done;
      x.deciding = i;
    }
  }
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
