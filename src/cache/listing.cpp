#include <npc/cache/listing.hpp>

#include <algorithm>
#include <map>

#include <npc/cache/layout.hpp>
#include <npc/cache/publish.hpp>

namespace npc::cache {

void note_entry_file(EntryInfo& info, std::string_view name, std::uint64_t size, bool regular) {
  if (regular) info.bytes += size;
  if (name == kGraphFile) {
    info.has_graph = regular;
    info.graph_bytes = size;
  } else if (name == kNeffFile) {
    info.has_neff = regular;
    if (regular) info.neff_bytes = size;
  } else if (is_done_marker(name)) info.has_done = true;
  else if (name == kLogFile) info.has_log = true;
  else if (name == kKilledLogFile) info.has_killed_log = true;
  else if (name == kFlagsFile) info.has_flags = true;
  else if (name == kLockFile) info.has_lock_file = true;
  else if (name == kFrameworkLockFile) info.framework_lock.state = storage::LockState::held;
}

ListedEntry read_listing(const std::vector<std::string>& names) {
  EntryInfo info;
  for (const auto& name : names) note_entry_file(info, name, 0);
  ListedEntry listed;
  listed.has_graph = info.has_graph;
  listed.done = info.has_done && info.has_neff;
  listed.done_without_neff = info.has_done && !info.has_neff;
  listed.failed = !info.has_done && info.has_log;
  listed.has_lock = info.framework_lock.state != storage::LockState::absent;
  return listed;
}

std::vector<EntryInfo> entries_from_tree(const std::vector<storage::TreeFile>& files, std::string_view folder) {
  const std::string prefix = folder.empty() ? std::string() : std::string(folder) + "/";
  std::map<std::string, EntryInfo> entries;
  std::map<std::string, storage::Time> used; // the folder's time, where the listing holds it
  for (const auto& file : files) {
    const std::string key = prefix + file.key;
    auto slash = key.find('/');
    if (slash == std::string::npos) continue;
    auto second = key.find('/', slash + 1);
    if (second == std::string::npos) continue;
    std::string entry_key = key.substr(0, second);
    std::string_view name = std::string_view(key).substr(second + 1);
    auto parsed = parse_key(entry_key);
    if (!parsed) continue; // ours (.npc/), or not an entry
    auto [it, added] = entries.try_emplace(entry_key);
    EntryInfo& info = it->second;
    if (added) {
      info.key = *parsed;
      info.dir = entry_key;
      info.last_used = file.modified;
    }
    info.last_used = std::max(info.last_used, file.modified);
    if (file.folder_time && name.find('/') == std::string_view::npos) {
      used[entry_key] = file.modified;
      info.bytes += file.size;
      continue;
    }
    note_entry_file(info, name, file.size);
  }
  std::vector<EntryInfo> out;
  out.reserve(entries.size());
  for (auto& [entry_key, info] : entries) {
    // The folder's time is the last use, even when a later file (a lock,
    // its renewal) was written since: those are not uses.
    if (auto u = used.find(entry_key); u != used.end()) info.last_used = u->second;
    out.push_back(std::move(info));
  }
  return out;
}

} // namespace npc::cache
