#include <npc/cache/precompile_record.hpp>

#include <algorithm>
#include <cctype>
#include <map>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <npc/util/strings.hpp>

namespace npc::cache {

namespace {

constexpr int kPrecompileRecordFormat = 1;

std::string record_key(std::string_view name) { return std::string(kPrecompilesDir) + "/" + std::string(name); }

// "20261129T100000Z": sorts as the time does.
std::string compact_utc(util::WallTime when) {
  std::string iso = util::format_utc(when); // 2026-11-29T10:00:00Z
  iso.erase(std::remove_if(iso.begin(), iso.end(), [](char c) { return c == '-' || c == ':'; }), iso.end());
  return iso;
}

// A host name as a file name's part: what is not a letter, digit, '.', '-'
// or '_' becomes '_'.
std::string name_part(std::string_view text) {
  std::string out;
  for (char c : text)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  return out.empty() ? "host" : out;
}

bool is_record_name(std::string_view name) { return name.ends_with(".json") && !name.starts_with("."); }

} // namespace

std::string serialize_precompile_record(const PrecompileRecord& record) {
  nlohmann::json graphs = nlohmann::json::array();
  for (const auto& g : record.graphs) graphs.push_back({{"key", g.key}, {"outcome", g.outcome}});
  nlohmann::json j = {{"format", kPrecompileRecordFormat},
                      {"started", util::format_utc_ms(record.started)},
                      {"ended", util::format_utc_ms(record.ended)},
                      {"host", record.host},
                      {"pid", record.pid},
                      {"compiler_version", record.compiler_version},
                      {"graphs", std::move(graphs)}};
  return j.dump(1) + "\n";
}

Result<PrecompileRecord> parse_precompile_record(std::string_view json_text) {
  auto j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("not a JSON object");
  auto format = j.find("format");
  if (format == j.end() || !format->is_number_integer() || format->get<int>() != kPrecompileRecordFormat)
    return fail("not a pre-compile record of format " + std::to_string(kPrecompileRecordFormat));
  PrecompileRecord record;
  auto time_of = [&](const char* field, util::WallTime& into) {
    auto it = j.find(field);
    if (it == j.end() || !it->is_string()) return false;
    auto t = util::parse_utc(it->get<std::string>());
    if (!t) return false;
    into = *t;
    return true;
  };
  if (!time_of("started", record.started) || !time_of("ended", record.ended))
    return fail("its started and ended times are missing or not times");
  if (auto it = j.find("host"); it != j.end() && it->is_string()) record.host = it->get<std::string>();
  if (auto it = j.find("pid"); it != j.end() && it->is_number_integer()) record.pid = it->get<std::int64_t>();
  if (auto it = j.find("compiler_version"); it != j.end() && it->is_string())
    record.compiler_version = it->get<std::string>();
  auto graphs = j.find("graphs");
  if (graphs == j.end() || !graphs->is_array()) return fail("it has no list of graphs");
  for (const auto& g : *graphs) {
    if (!g.is_object()) continue;
    auto key = g.find("key");
    auto outcome = g.find("outcome");
    if (key == g.end() || !key->is_string()) continue;
    record.graphs.push_back(
        {key->get<std::string>(), outcome != g.end() && outcome->is_string() ? outcome->get<std::string>() : ""});
  }
  return record;
}

Status write_precompile_record(storage::Storage& storage, PrecompileRecord& record) {
  record.name = compact_utc(record.started) + "-" + name_part(record.host) + "-" + std::to_string(record.pid) + ".json";
  if (auto s = status_of(storage.write(record_key(record.name), serialize_precompile_record(record), storage::IfPresent::replace)); !s)
    return fail("cannot record the pre-compile in " + storage.describe(record_key(record.name)) + ": " + s.error());
  auto names = storage.list(kPrecompilesDir);
  if (!names) return ok_status();
  std::vector<std::string> records;
  for (const auto& n : *names)
    if (is_record_name(n)) records.push_back(n);
  std::sort(records.begin(), records.end());
  for (std::size_t i = 0; i + kKeptPrecompileRecords < records.size(); ++i)
    std::ignore = storage.remove(record_key(records[i]));
  return ok_status();
}

Result<std::vector<PrecompileRecord>> read_precompile_records(const storage::Storage& storage) {
  auto names = storage.list(kPrecompilesDir);
  if (!names) return fail(names.error());
  std::vector<std::string> sorted;
  for (const auto& n : *names)
    if (is_record_name(n)) sorted.push_back(n);
  std::sort(sorted.begin(), sorted.end());
  std::vector<PrecompileRecord> records;
  for (const auto& name : sorted) {
    auto text = storage.read(record_key(name), kMaxPrecompileRecordBytes);
    if (!text) {
      // Pruned by a launcher recording meanwhile (the oldest go): nothing
      // was lost that the listing needs.
      if (auto there = storage.stat(record_key(name)); there && !there->has_value()) {
        spdlog::debug("the pre-compile record {} was pruned as it was read", storage.describe(record_key(name)));
        continue;
      }
      spdlog::warn("cannot read the pre-compile record {}: {}", storage.describe(record_key(name)), text.error());
      continue;
    }
    auto record = parse_precompile_record(*text);
    if (!record) {
      spdlog::warn("skipping the pre-compile record {}: {}", storage.describe(record_key(name)), record.error());
      continue;
    }
    record->name = name;
    records.push_back(std::move(*record));
  }
  // By start (the names sort so, unless a host's clock is off).
  std::stable_sort(records.begin(), records.end(),
                   [](const PrecompileRecord& a, const PrecompileRecord& b) { return a.started < b.started; });
  return records;
}

std::vector<PrecompileRecord> last_precompile(std::vector<PrecompileRecord> oldest_first) {
  if (oldest_first.empty()) return {};
  // The newest by its end: a long run that started first may end last.
  auto newest = std::max_element(oldest_first.begin(), oldest_first.end(),
                                 [](const PrecompileRecord& a, const PrecompileRecord& b) { return a.ended < b.ended; });
  const util::WallTime started = newest->started;
  const util::WallTime ended = newest->ended;
  std::vector<PrecompileRecord> run;
  for (auto& r : oldest_first)
    if (r.started <= ended && r.ended >= started) run.push_back(std::move(r));
  return run;
}

util::WallTime precompile_end(const std::vector<PrecompileRecord>& records) {
  util::WallTime ended{};
  for (const auto& r : records) ended = std::max(ended, r.ended);
  return ended;
}

std::vector<CacheKey> precompile_keys(const std::vector<PrecompileRecord>& records) {
  std::map<std::string, CacheKey> by_name;
  for (const auto& r : records)
    for (const auto& g : r.graphs)
      if (auto key = parse_key(g.key)) by_name.emplace(key->str(), *key);
  std::vector<CacheKey> keys;
  keys.reserve(by_name.size());
  for (auto& [name, key] : by_name) keys.push_back(std::move(key));
  return keys;
}

} // namespace npc::cache
