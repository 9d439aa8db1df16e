#include <npc/cache/remote_explain.hpp>

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

// The key an entry key or URL names, nullopt for anything else.
std::optional<CacheKey> named_key(const Cache& remote, std::string_view target) {
  std::string_view name = trimmed(target);
  const std::string root = remote.describe() + "/";
  if (name.starts_with(root)) {
    name.remove_prefix(root.size());
    const std::string graph_suffix = "/" + std::string(kGraphFile);
    if (name.ends_with(graph_suffix)) name.remove_suffix(graph_suffix.size());
  }
  auto key = parse_key(name);
  if (!key || key->relative_path().generic_string() != name) return std::nullopt;
  return key;
}

// The entry's graph and flags, into scratch/<key>/; false without a graph.
bool download_entry(const Cache& remote, const CacheKey& key, const fs::path& dir) {
  if (auto s = util::ensure_dir(dir); !s) throw EnvironmentError(s.error());
  for (auto file : {kGraphFile, kFlagsFile}) {
    auto got = remote.storage()->get_file(key.relative_path().generic_string() + "/" + std::string(file), dir / file);
    if (!got) throw EnvironmentError(got.error());
    if (!*got && file == kGraphFile) return false;
  }
  return true;
}

} // namespace

std::optional<RemoteGraph> remote_target_graph(const Cache& remote, std::string_view target,
                                               const fs::path& scratch) {
  auto key = named_key(remote, target);
  if (!key) return std::nullopt;
  fs::path dir = scratch / "target" / key->relative_path();
  if (!download_entry(remote, *key, dir)) return std::nullopt;
  return RemoteGraph{dir / kGraphFile, remote.storage()->describe(key->relative_path().generic_string()) + "/" + std::string(kGraphFile)};
}

Result<Explanation> explain_remote_graph(const Cache& remote, const fs::path& graph,
                                         const CurrentSettings& current, const fs::path& scratch) {
  std::error_code ec;
  const auto size = fs::file_size(graph, ec);
  if (ec) return fail(util::errno_text("cannot read", graph, ec.value()));
  // Entries of another graph size cannot hold these bytes: left out unread.
  std::vector<EntryInfo> candidates;
  for (auto& entry : remote.list()) {
    if (!entry.has_graph || entry.graph_bytes != size) continue;
    fs::path dir = scratch / "entries" / entry.key.relative_path();
    if (!download_entry(remote, entry.key, dir)) continue; // removed since the listing
    entry.dir = dir;
    candidates.push_back(std::move(entry));
  }
  auto x = explain_graph(std::move(candidates), graph, current);
  if (!x) return x;
  for (auto& m : x->matches) m.entry.dir = remote.storage()->describe(m.entry.key.relative_path().generic_string());
  return x;
}

} // namespace npc::cache
