#include <npc/cache/explain_target.hpp>

#include <string>
#include <system_error>

#include <npc/cache/layout.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>

namespace npc::cache {

namespace {

// `name` without the slashes it may end with.
std::string_view trimmed(std::string_view name) {
  while (name.ends_with('/')) name.remove_suffix(1);
  return name;
}

// The key an entry key names, or where the cache is (its URL; a
// directory's path, of an entry gone since) the entry or its graph; nullopt
// for anything else.
std::optional<CacheKey> named_key(const Cache& cache, std::string_view target) {
  std::string_view name = trimmed(target);
  const std::string root = cache.describe() + "/";
  if (name.starts_with(root)) {
    name.remove_prefix(root.size());
    const std::string graph_suffix = "/" + std::string(kGraphFile);
    if (name.ends_with(graph_suffix)) name.remove_suffix(graph_suffix.size());
  }
  auto key = parse_key(name);
  if (!key || key->relative_path().generic_string() != name) return std::nullopt;
  return key;
}

std::string graph_url(const Cache& cache, const CacheKey& key) {
  return cache.storage()->describe(key.relative_path().generic_string() + "/" + std::string(kGraphFile));
}

// The graph of the entry `key` of the cache, as a local file.
std::optional<TargetGraph> entry_graph(const Cache& cache, const CacheKey& key, const fs::path& scratch) {
  auto dir = cache.reading().local_files(cache, key, scratch / "target");
  if (!dir) return std::nullopt;
  return TargetGraph{*dir / kGraphFile, graph_url(cache, key)};
}

} // namespace

std::optional<TargetGraph> find_target_graph(const Cache& cache, std::string_view target, const fs::path& scratch) {
  if (target.empty()) return std::nullopt;
  std::error_code ec;
  fs::path path{std::string(target)};
  auto status = fs::status(path, ec);
  if (!ec && fs::is_regular_file(status)) return TargetGraph{path, path.string()};
  if (!ec && fs::is_directory(status)) {
    fs::path graph = path / kGraphFile;
    if (fs::is_regular_file(graph, ec)) return TargetGraph{graph, graph.string()};
    return std::nullopt;
  }
  if (auto key = named_key(cache, target)) return entry_graph(cache, *key, scratch);
  CacheKey module;
  if (target.find('/') == std::string_view::npos && parse_module_name(target, module.graph_hash, module.flags_hash))
    for (const auto& e : cache.list())
      if (e.key.graph_hash == module.graph_hash && e.key.flags_hash == module.flags_hash && e.has_graph)
        if (auto graph = entry_graph(cache, e.key, scratch)) return graph;
  return std::nullopt;
}

Result<Explanation> explain_in_cache(const Cache& cache, const fs::path& graph, const CurrentSettings& current,
                                     const fs::path& scratch) {
  std::error_code ec;
  const auto size = fs::file_size(graph, ec);
  if (ec) return fail(util::errno_text("cannot read", graph, ec.value()));
  // Entries of another graph size cannot hold these bytes: left out unread.
  std::vector<EntryInfo> candidates;
  for (auto& entry : cache.list()) {
    if (!entry.has_graph || entry.graph_bytes != size) continue;
    auto dir = cache.reading().local_files(cache, entry.key, scratch / "entries");
    if (!dir) continue; // removed since the listing
    entry.dir = *dir;
    candidates.push_back(std::move(entry));
  }
  auto x = explain_graph(std::move(candidates), graph, current);
  if (!x) return x;
  for (auto& m : x->matches) m.entry.dir = cache.storage()->describe(m.entry.key.relative_path().generic_string());
  return x;
}

} // namespace npc::cache
