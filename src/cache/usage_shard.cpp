#include <npc/cache/usage_shard.hpp>

#include <algorithm>
#include <array>
#include <cmath>

#include <nlohmann/json.hpp>

#include <npc/util/json_text.hpp>

namespace npc::cache {

using nlohmann::json;

namespace {

constexpr std::array<std::pair<const char*, std::uint64_t UsageCounts::*>, 4> kCountFields = {{
    {"hits", &UsageCounts::hits},
    {"hits_without_time", &UsageCounts::hits_without_time},
    {"misses", &UsageCounts::misses},
    {"failed", &UsageCounts::failed},
}};
constexpr std::array<std::pair<const char*, double UsageCounts::*>, 2> kSecondsFields = {{
    {"compile_seconds", &UsageCounts::compile_seconds},
    {"saved_seconds", &UsageCounts::saved_seconds},
}};

std::uint64_t add_count(std::uint64_t a, std::uint64_t b) {
  return a >= kMaxUsageCount || b >= kMaxUsageCount - a ? kMaxUsageCount : a + b;
}

double add_seconds(double a, double b) { return std::min(a + b, kMaxUsageSeconds); }

// The value of a field, as the shard's text has it: for a message.
std::string shown(const json& value) {
  // A key of the value's object may hold bytes that are not UTF-8 (nlohmann
  // reads them as they are): replaced, or dump would throw.
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  constexpr std::size_t kShownChars = 40; // enough for any number; a long string is cut
  if (text.size() > kShownChars) text = text.substr(0, kShownChars) + "...";
  return text;
}

Result<UsageCounts> counts_from(const std::string& program, const json& j) {
  if (!j.is_object()) return fail("the counters of '" + program + "' are not an object");
  UsageCounts c;
  for (const auto& [name, field] : kCountFields) {
    auto it = j.find(name);
    if (it == j.end()) continue;
    // nlohmann reads a non-negative integer as unsigned: a negative count,
    // a fraction or 1e30 is not one.
    if (!it->is_number_unsigned() || it->get<std::uint64_t>() > kMaxUsageCount)
      return fail("'" + program + "' has " + name + " " + shown(*it) + ", not a count from 0 to 2^53");
    c.*field = it->get<std::uint64_t>();
  }
  for (const auto& [name, field] : kSecondsFields) {
    auto it = j.find(name);
    if (it == j.end()) continue;
    const double seconds = it->is_number() ? it->get<double>() : -1;
    if (!(seconds >= 0 && seconds <= kMaxUsageSeconds)) // NaN fails too
      return fail("'" + program + "' has " + name + " " + shown(*it) + ", not a number of seconds from 0 to 1e13");
    c.*field = seconds;
  }
  if (c.hits_without_time > c.hits)
    return fail("'" + program + "' has more hits without a time (" + std::to_string(c.hits_without_time) +
                ") than hits (" + std::to_string(c.hits) + ")");
  return c;
}

} // namespace

UsageCounts& UsageCounts::operator+=(const UsageCounts& other) {
  hits = add_count(hits, other.hits);
  hits_without_time = add_count(hits_without_time, other.hits_without_time);
  misses = add_count(misses, other.misses);
  failed = add_count(failed, other.failed);
  compile_seconds = add_seconds(compile_seconds, other.compile_seconds);
  saved_seconds = add_seconds(saved_seconds, other.saved_seconds);
  return *this;
}

Result<UsageShard> parse_usage_shard(std::string_view text) {
  UsageShard shard;
  if (text.empty()) return shard;
  auto doc = util::parse_json_text(text);
  if (!doc) return fail(doc.error() + " (a write cut short, or not ours)");
  if (!doc->is_object()) return fail("not a JSON object");
  if (auto it = doc->find("zeroed_unix"); it != doc->end()) {
    if (!it->is_number_integer() || (it->is_number_unsigned() ? it->get<std::uint64_t>() > kMaxZeroedUnix
                                                               : it->get<std::int64_t>() < 0))
      return fail("zeroed_unix " + shown(*it) + " is not a time from 1970 to 2100");
    shard.zeroed_unix = it->get<std::int64_t>();
  }
  if (auto programs = doc->find("programs"); programs != doc->end()) {
    if (!programs->is_object()) return fail("'programs' is not an object");
    for (const auto& [name, counts] : programs->items()) {
      auto read = counts_from(name, counts);
      if (!read) return fail(read.error());
      shard.by_program[name] = *read;
    }
  }
  return shard;
}

std::string serialize_usage_shard(const UsageShard& shard) {
  json programs = json::object();
  for (const auto& [name, c] : shard.by_program) {
    json counts = json::object();
    for (const auto& [field, member] : kCountFields) counts[field] = c.*member;
    for (const auto& [field, member] : kSecondsFields) counts[field] = c.*member;
    programs[name] = counts;
  }
  return util::to_json_text(json{{"programs", programs}, {"zeroed_unix", shard.zeroed_unix}}) + "\n";
}

} // namespace npc::cache
