#include <npc/cache/key.hpp>

#include <sstream>

#include <npc/cache/layout.hpp>
#include <npc/util/sha256.hpp>
#include <npc/util/shell_words.hpp>

namespace npc::cache {

namespace {
bool is_hex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return !s.empty();
}
} // namespace

std::string CacheKey::version_dir() const { return std::string(kVersionDirPrefix) + compiler_version; }
std::string CacheKey::module_name() const {
  return std::string(kModulePrefix) + graph_hash + "+" + flags_hash;
}
std::string CacheKey::str() const { return version_dir() + "/" + module_name(); }
fs::path CacheKey::relative_path() const { return fs::path(version_dir()) / module_name(); }

std::string joined_flags(const std::vector<std::string>& flags) {
  std::string text;
  for (std::size_t i = 0; i < flags.size(); ++i) {
    if (i > 0) text += ' ';
    text += flags[i];
  }
  return text;
}

std::string flags_hash(const std::vector<std::string>& flags) {
  return util::md5_hex(joined_flags(flags)).substr(0, kFlagsHashDigits);
}

std::string canonical_flags(const std::vector<std::string>& flags) {
  std::string encoding;
  for (const auto& flag : flags) {
    encoding += std::to_string(flag.size());
    encoding += ':';
    encoding += flag;
    encoding += ';';
  }
  return encoding;
}

bool valid_compiler_version(std::string_view version) {
  if (version.empty() || version.size() > 128 || version == "." || version == "..") return false;
  for (char c : version) {
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              c == '.' || c == '+' || c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

std::string legacy_flags_hash(const std::vector<std::string>& flags) {
  return util::sha256_hex(canonical_flags(flags)).substr(0, kFlagsHashDigits);
}

CacheKey make_key(std::string_view graph_sha256, const std::vector<std::string>& flags,
                  const std::string& compiler_version, KeyInputs* inputs) {
  std::string text = joined_flags(flags);
  std::string md5 = util::md5_hex(text);
  CacheKey key{compiler_version, std::string(graph_sha256.substr(0, kGraphHashDigits)),
               md5.substr(0, kFlagsHashDigits)};
  if (inputs != nullptr) {
    inputs->graph_sha256 = std::string(graph_sha256);
    inputs->flags = flags;
    inputs->flags_text = std::move(text);
    inputs->flags_md5 = std::move(md5);
    inputs->legacy_flags_encoding = canonical_flags(flags);
    inputs->legacy_flags_sha256 = util::sha256_hex(inputs->legacy_flags_encoding);
    inputs->compiler_version = compiler_version;
  }
  return key;
}

CacheKey legacy_key(std::string_view graph_sha256, const std::vector<std::string>& flags,
                    const std::string& compiler_version) {
  return CacheKey{compiler_version, std::string(graph_sha256.substr(0, kGraphHashDigits)),
                  legacy_flags_hash(flags)};
}

CacheKey make_key_for_graph(std::string_view graph_bytes, const std::vector<std::string>& flags,
                            const std::string& compiler_version, KeyInputs* inputs) {
  CacheKey key = make_key(util::sha256_hex(graph_bytes), flags, compiler_version, inputs);
  if (inputs != nullptr) inputs->graph_bytes = graph_bytes.size();
  return key;
}

bool parse_module_name(std::string_view name, std::string& graph_hash, std::string& flags_hash) {
  if (!name.starts_with(kModulePrefix)) return false;
  name.remove_prefix(kModulePrefix.size());
  auto plus = name.find('+');
  if (plus == std::string_view::npos) return false;
  auto g = name.substr(0, plus), f = name.substr(plus + 1);
  if (!is_hex(g) || !is_hex(f)) return false;
  graph_hash = std::string(g);
  flags_hash = std::string(f);
  return true;
}

std::optional<CacheKey> key_from_module_name(std::string_view module_name,
                                             const std::string& compiler_version) {
  CacheKey key;
  key.compiler_version = compiler_version;
  if (!parse_module_name(module_name, key.graph_hash, key.flags_hash)) return std::nullopt;
  return key;
}

std::optional<CacheKey> parse_key(std::string_view text) {
  while (!text.empty() && text.back() == '/') text.remove_suffix(1);
  auto slash = text.rfind('/');
  if (slash == std::string_view::npos) return std::nullopt;
  auto module = text.substr(slash + 1);
  auto rest = text.substr(0, slash);
  auto version_start = rest.rfind('/');
  auto version_dir = version_start == std::string_view::npos ? rest : rest.substr(version_start + 1);
  if (!version_dir.starts_with(kVersionDirPrefix)) return std::nullopt;
  CacheKey key;
  key.compiler_version = std::string(version_dir.substr(kVersionDirPrefix.size()));
  if (!valid_compiler_version(key.compiler_version)) return std::nullopt;
  if (!parse_module_name(module, key.graph_hash, key.flags_hash)) return std::nullopt;
  return key;
}

std::string explain_key(const KeyInputs& inputs, const CacheKey& key) {
  std::ostringstream out;
  out << "entry: " << key.str() << "\n"
      << "compiler version: " << inputs.compiler_version << "  -> " << key.version_dir() << "\n"
      << "graph: " << inputs.graph_bytes << " bytes, sha256 " << inputs.graph_sha256
      << "  -> graph hash " << key.graph_hash << " (first " << kGraphHashDigits << " digits)\n"
      << "flags (" << inputs.flags.size() << "): " << util::join_shell_words(inputs.flags) << "\n"
      << "flags text (joined by single spaces): [" << inputs.flags_text << "]\n"
      << "flags md5: " << inputs.flags_md5 << "  -> flags hash " << key.flags_hash << " (first "
      << kFlagsHashDigits << " digits)\n";
  CacheKey legacy{key.compiler_version, key.graph_hash, inputs.legacy_flags_sha256.substr(0, kFlagsHashDigits)};
  out << "legacy entry (read only): " << legacy.str() << "\n"
      << "legacy flags encoding: " << inputs.legacy_flags_encoding << "\n"
      << "legacy flags sha256: " << inputs.legacy_flags_sha256 << "  -> legacy flags hash "
      << legacy.flags_hash << " (first " << kFlagsHashDigits << " digits)\n";
  return out.str();
}

} // namespace npc::cache
