#include <npc/bundle/manifest.hpp>

#include <algorithm>

#include <npc/cache/entry.hpp>
#include <npc/cache/layout.hpp>

namespace npc::bundle {

bool is_bundle_file_name(std::string_view name) {
  const auto& files = cache::kTransferFiles;
  return std::find(files.begin(), files.end(), name) != files.end();
}

std::string member_name(const cache::CacheKey& key, std::string_view file) {
  return std::string(kBundleEntriesDir) + "/" + key.str() + "/" + std::string(file);
}

std::optional<MemberName> parse_member_name(std::string_view name) {
  // At most five parts are split off: a name with more is refused anyway.
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    auto slash = name.find('/', start);
    parts.push_back(name.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos || parts.size() > 4) break;
    start = slash + 1;
  }
  if (parts.size() != 4 || parts[0] != kBundleEntriesDir) return std::nullopt;
  if (!parts[1].starts_with(cache::kVersionDirPrefix)) return std::nullopt;
  MemberName member;
  member.key.compiler_version = std::string(parts[1].substr(cache::kVersionDirPrefix.size()));
  if (!cache::valid_compiler_version(member.key.compiler_version)) return std::nullopt;
  if (!cache::parse_module_name(parts[2], member.key.graph_hash, member.key.flags_hash)) return std::nullopt;
  if (!is_bundle_file_name(parts[3])) return std::nullopt;
  member.file = std::string(parts[3]);
  // Exactly the canonical spelling, nothing that merely resolves to it.
  if (member_name(member.key, member.file) != name) return std::nullopt;
  return member;
}

} // namespace npc::bundle
