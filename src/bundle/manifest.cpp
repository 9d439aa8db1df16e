#include <npc/bundle/manifest.hpp>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include <npc/bundle/printable.hpp>
#include <npc/cache/layout.hpp>
#include <npc/util/json_text.hpp>

namespace npc::bundle {

using nlohmann::json;

std::string serialize_manifest(const BundleManifest& manifest) {
  json entries = json::array();
  for (const auto& e : manifest.entries) {
    json files = json::object();
    for (const auto& [name, file] : e.files) files[name] = {{"bytes", file.bytes}, {"sha256", file.sha256}};
    entries.push_back({{"key", e.key.str()},
                       {"compiler_version", e.key.compiler_version},
                       {"state", e.failed ? "failed" : "done"},
                       {"flags", e.flags ? json(*e.flags) : json(nullptr)},
                       {"files", files}});
  }
  json doc = {{"format", manifest.format},
              {"tool", "neuron_parallel_compile"},
              {"tool_version", manifest.tool_version},
              {"created", manifest.created},
              {"entries", entries}};
  return util::to_json_text(doc, 1) + "\n";
}

namespace {

bool is_sha256_hex(std::string_view s) {
  if (s.size() != 64) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// The key a manifest record names, or "(entry N)" when it names none: what
// duplicates are found by and what a bad record is reported under.
std::string key_text_of(const json& e, std::size_t index) {
  if (e.is_object())
    if (auto k = e.find("key"); k != e.end() && k->is_string()) return k->get<std::string>();
  return "(entry " + std::to_string(index) + ")";
}

Result<std::optional<std::vector<std::string>>> parse_flags(const json& e) {
  auto flags = e.find("flags");
  if (flags == e.end() || flags->is_null()) return std::optional<std::vector<std::string>>();
  if (!flags->is_array()) return fail("'flags' is not a list");
  std::vector<std::string> list;
  for (const auto& f : *flags) {
    if (!f.is_string()) return fail("'flags' is not a list of strings");
    list.push_back(f.get<std::string>());
  }
  return std::optional<std::vector<std::string>>(std::move(list));
}

Result<std::map<std::string, BundleFile>> parse_files(const json& e) {
  auto files = e.find("files");
  if (files == e.end() || !files->is_object()) return fail("no 'files' object");
  std::map<std::string, BundleFile> out;
  for (const auto& [name, record] : files->items()) {
    if (!is_bundle_file_name(name)) return fail("unknown file '" + printable(name) + "'");
    if (!record.is_object()) return fail("the record of " + name + " is not an object");
    auto bytes = record.find("bytes");
    auto sha = record.find("sha256");
    if (bytes == record.end() || !bytes->is_number_unsigned())
      return fail("the record of " + name + " has no byte count");
    if (sha == record.end() || !sha->is_string() || !is_sha256_hex(sha->get<std::string>()))
      return fail("the record of " + name + " has no SHA-256");
    out[name] = BundleFile{bytes->get<std::uint64_t>(), sha->get<std::string>()};
  }
  return out;
}

// One manifest entry; the reason when it is unusable.
Result<BundleEntry> parse_manifest_entry(const json& e, const std::string& key_text) {
  if (!e.is_object()) return fail("not a JSON object");
  auto key = cache::parse_key(key_text);
  if (!key || key->str() != key_text) return fail("'" + printable(key_text) + "' is not a cache key");
  BundleEntry entry;
  entry.key = *key;
  auto version = e.find("compiler_version");
  if (version == e.end() || !version->is_string() || version->get<std::string>() != key->compiler_version)
    return fail("its compiler_version does not match its key");
  auto state = e.find("state");
  std::string state_text = state != e.end() && state->is_string() ? state->get<std::string>() : "done";
  if (state_text != "done" && state_text != "failed") return fail("unknown state '" + printable(state_text) + "'");
  entry.failed = state_text == "failed";
  auto flags = parse_flags(e);
  if (!flags) return fail(flags.error());
  entry.flags = std::move(*flags);
  auto files = parse_files(e);
  if (!files) return fail(files.error());
  entry.files = std::move(*files);
  bool has_neff = entry.files.contains(std::string(cache::kNeffFile));
  bool has_log = entry.files.contains(std::string(cache::kLogFile));
  if (!entry.failed && !has_neff) return fail("a done entry without model.neff");
  if (entry.failed && (!has_log || has_neff)) return fail("a failed entry must have model.log and no model.neff");
  return entry;
}

// Fails unless the document is of the one format this version reads.
Status check_format(const json& doc) {
  auto format = doc.find("format");
  if (format == doc.end() || !format->is_number_integer()) return fail("no format number");
  if (format->get<long long>() != kBundleFormat) {
    if (format->get<long long>() > kBundleFormat)
      return fail("it is format " + std::to_string(format->get<long long>()) +
                  ", from a newer version; this one reads format " + std::to_string(kBundleFormat));
    return fail("unknown format " + std::to_string(format->get<long long>()));
  }
  return ok_status();
}

} // namespace

Result<ParsedManifest> parse_manifest(std::string_view json_text) {
  auto document = util::parse_json_text(json_text);
  if (!document || !document->is_object()) return fail("not a JSON object");
  const json& doc = *document;
  if (auto format = check_format(doc); !format) return fail(format.error());
  ParsedManifest parsed;
  if (auto v = doc.find("tool_version"); v != doc.end() && v->is_string()) parsed.manifest.tool_version = *v;
  if (auto v = doc.find("created"); v != doc.end() && v->is_string()) parsed.manifest.created = *v;
  auto entries = doc.find("entries");
  if (entries == doc.end() || !entries->is_array()) return fail("no 'entries' list");
  std::set<std::string> seen;
  std::size_t index = 0;
  for (const auto& e : *entries) {
    std::string key_text = key_text_of(e, ++index);
    if (!seen.insert(key_text).second) return fail("it lists " + printable(key_text) + " twice");
    auto entry = parse_manifest_entry(e, key_text);
    if (!entry) {
      parsed.bad.push_back({printable(key_text), "its manifest record is unusable: " + entry.error()});
      continue;
    }
    parsed.manifest.entries.push_back(std::move(*entry));
  }
  return parsed;
}

} // namespace npc::bundle
