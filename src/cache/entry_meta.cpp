#include <npc/cache/entry_meta.hpp>

#include <nlohmann/json.hpp>

#include <npc/cache/key.hpp>
#include <npc/cache/layout.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/json_text.hpp>

namespace npc::cache {

using nlohmann::json;

const AttemptRecord* EntryMeta::last_success() const {
  for (auto it = attempts.rbegin(); it != attempts.rend(); ++it)
    if (it->outcome == "success") return &*it;
  return nullptr;
}

const AttemptRecord* EntryMeta::failed_for_good_in(std::string_view run) const {
  if (run.empty() || attempts.empty()) return nullptr;
  const AttemptRecord& last_attempt = attempts.back();
  if (last_attempt.run != run || !last_attempt.last) return nullptr;
  if (last_attempt.outcome != "failed" && last_attempt.outcome != "timeout") return nullptr;
  // Killed from outside (the OOM killer): a fact about the host, not the
  // graph; another host may have the memory. (A timeout is our own SIGKILL,
  // recorded as "timeout".)
  if (last_attempt.outcome == "failed" && last_attempt.signal == "SIGKILL") return nullptr;
  return &last_attempt;
}

std::string describe_run_failure(const AttemptRecord& failed) {
  return (failed.outcome == "timeout" ? failed.exit : "compiler " + failed.exit) + " in " + failed.by + " (" +
         failed.run + ")";
}

FlagsOrigin EntryMeta::flags_origin() const {
  return attempts.empty() ? FlagsOrigin::neuron_cc_flags : attempts.back().flags_from;
}

namespace {

// An attempt's "flags_from", written only for the masquerade's compiles: a
// record without it is keyed by NEURON_CC_FLAGS, as every record before it.
constexpr const char* kFlagsFromField = "flags_from";
constexpr const char* kCompilerCommandLine = "neuronx-cc command line";

// The record is ours, but it lives in a shared directory: read it strictly
// (types checked) and never trust it to be well formed.
template <typename T> bool get_to(const json& object, const char* name, T& out) {
  auto it = object.find(name);
  if (it == object.end()) return true;
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return false;
  } else if constexpr (std::is_same_v<T, double>) {
    if (!it->is_number()) return false;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return false;
  } else {
    if (!it->is_number_integer()) return false;
  }
  out = it->get<T>();
  return true;
}

} // namespace

Result<EntryMeta> parse_entry_meta(std::string_view json_text) {
  auto parsed = util::parse_json_text(json_text);
  if (!parsed || !parsed->is_object()) return fail("not a JSON object");
  const json& doc = *parsed;
  EntryMeta meta;
  if (auto it = doc.find("neff"); it != doc.end()) {
    if (!it->is_object()) return fail("'neff' is not an object");
    std::string sha;
    std::uint64_t bytes = 0;
    if (!get_to(*it, "sha256", sha) || !get_to(*it, "bytes", bytes))
      return fail("'neff' has fields of the wrong type");
    if (it->contains("sha256")) meta.neff_sha256 = sha;
    if (it->contains("bytes")) meta.neff_bytes = bytes;
  }
  if (!get_to(doc, "graph_bytes", meta.graph_bytes)) return fail("'graph_bytes' is not a number");
  if (auto it = doc.find("attempts"); it != doc.end()) {
    if (!it->is_array()) return fail("'attempts' is not an array");
    for (const auto& a : *it) {
      if (!a.is_object()) return fail("an attempt is not an object");
      AttemptRecord r;
      if (!get_to(a, "attempt", r.attempt) || !get_to(a, "outcome", r.outcome) ||
          !get_to(a, "exit", r.exit) || !get_to(a, "exit_code", r.exit_code) ||
          !get_to(a, "signal", r.signal) || !get_to(a, "wall_seconds", r.wall_seconds) ||
          !get_to(a, "peak_rss_bytes", r.peak_rss_bytes) ||
          !get_to(a, "started_unix", r.started_unix) || !get_to(a, "run", r.run) || !get_to(a, "by", r.by) ||
          !get_to(a, "last", r.last))
        return fail("an attempt has fields of the wrong type");
      std::string flags_from;
      if (!get_to(a, kFlagsFromField, flags_from)) return fail("an attempt has fields of the wrong type");
      // Another value (a later release's) keys the entry as before it.
      if (flags_from == kCompilerCommandLine) r.flags_from = FlagsOrigin::compiler_command_line;
      meta.attempts.push_back(std::move(r));
    }
  }
  return meta;
}

std::string serialize_entry_meta(const EntryMeta& meta) {
  json doc = json::object();
  doc["format"] = 1;
  if (meta.neff_sha256 || meta.neff_bytes) {
    json neff = json::object();
    if (meta.neff_sha256) neff["sha256"] = *meta.neff_sha256;
    if (meta.neff_bytes) neff["bytes"] = *meta.neff_bytes;
    doc["neff"] = neff;
  }
  doc["graph_bytes"] = meta.graph_bytes;
  json attempts = json::array();
  for (const auto& r : meta.attempts) {
    json attempt = {{"attempt", r.attempt},
                    {"outcome", r.outcome},
                    {"exit", r.exit},
                    {"exit_code", r.exit_code},
                    {"signal", r.signal},
                    {"wall_seconds", r.wall_seconds},
                    {"peak_rss_bytes", r.peak_rss_bytes},
                    {"started_unix", r.started_unix}};
    // Only in a run of several launchers: other records stay as they were.
    if (!r.run.empty()) {
      attempt["run"] = r.run;
      attempt["by"] = r.by;
      attempt["last"] = r.last;
    }
    if (r.flags_from == FlagsOrigin::compiler_command_line) attempt[kFlagsFromField] = kCompilerCommandLine;
    attempts.push_back(std::move(attempt));
  }
  doc["attempts"] = attempts;
  return util::to_json_text(doc, 1) + "\n";
}

Result<EntryMeta> read_entry_meta(const fs::path& entry_dir) {
  fs::path path = entry_dir / kMetaFile;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return EntryMeta{};
  auto text = util::read_file(path);
  if (!text) return fail(text.error());
  auto meta = parse_entry_meta(*text);
  if (!meta) return fail(path.string() + " is corrupt: " + meta.error());
  return meta;
}

Status write_entry_meta(const fs::path& entry_dir, const EntryMeta& meta) {
  return util::write_file_atomic(entry_dir / kMetaFile, serialize_entry_meta(meta));
}

Result<std::vector<std::string>> parse_compile_flags(std::string_view json_text) {
  // torch-neuronx writes this file too: Python's json.dump escapes a flag's
  // undecodable bytes as \udcXX, which parse_json_text turns back into them.
  auto parsed = util::parse_json_text(json_text);
  if (!parsed) return fail(parsed.error());
  const json& doc = *parsed;
  if (!doc.is_array()) return fail("not a JSON array of strings");
  std::vector<std::string> flags;
  for (const auto& item : doc) {
    if (!item.is_string()) return fail("not a JSON array of strings");
    flags.push_back(item.get<std::string>());
  }
  return flags;
}

std::string serialize_compile_flags(const std::vector<std::string>& flags) {
  return util::to_json_text(json(flags)) + "\n";
}

Result<std::vector<std::string>> read_compile_flags(const fs::path& entry_dir) {
  fs::path path = entry_dir / kFlagsFile;
  auto text = util::read_file(path);
  if (!text) return fail(text.error());
  auto flags = parse_compile_flags(*text);
  if (!flags) return fail(path.string() + " is corrupt: " + flags.error());
  return flags;
}

bool compile_flags_hash_to(std::string_view json_text, std::string_view hash) {
  auto flags = parse_compile_flags(json_text);
  return flags && flags_hash(*flags) == hash;
}

} // namespace npc::cache
