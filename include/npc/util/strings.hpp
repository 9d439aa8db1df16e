#pragma once
// Parsing and formatting of the values users type and read: sizes, counts,
// durations.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <npc/util/result.hpp>

namespace npc::util {

// "1000", "100GB", "1.5G", "512MiB", "64k" -> bytes. Decimal suffixes
// (k, M, G, T, with or without B) are powers of 1000, binary ones (Ki, Mi,
// Gi, Ti, with or without B) powers of 1024. Returns nullopt on anything else.
[[nodiscard]] std::optional<std::uint64_t> parse_bytes(std::string_view text);

// A non-negative decimal number ("30", "0.5"); nullopt otherwise.
[[nodiscard]] std::optional<double> parse_non_negative(std::string_view text);

// A timeout in seconds as every program's options take it ("3600", "0.5"):
// positive to the millisecond, at most a billion seconds; nullopt otherwise,
// and the message is then kPositiveSecondsExpected.
[[nodiscard]] std::optional<std::chrono::milliseconds> parse_positive_seconds(std::string_view text);
inline constexpr std::string_view kPositiveSecondsExpected = "expected a positive number of seconds";

// A whole number in [min, max]; nullopt otherwise.
[[nodiscard]] std::optional<long long> parse_integer(std::string_view text, long long min,
                                                     long long max);

// True for 1/true/yes/on (any case): how NEURON_* switches are read.
[[nodiscard]] bool is_truthy(std::string_view value);

// "%20" -> " " and so on, as in a URL's path; a '%' not followed by two hex
// digits is an error naming where it is. Any byte may come out (%00 aside).
[[nodiscard]] Result<std::string> percent_decode(std::string_view text);

// A yes/no environment variable: unset, empty, 0, false, no, off are no;
// 1, true, yes, on are yes (any case); anything else is a UsageError naming
// the variable and its value, so that a typo never silently means no.
[[nodiscard]] bool env_flag(const char* name);

// Value of an environment variable, or nullopt when unset.
[[nodiscard]] std::optional<std::string> env(const char* name);

[[nodiscard]] std::string format_bytes(std::uint64_t bytes); // "1.5 GB"
[[nodiscard]] std::string format_seconds(double seconds);    // "1m05s", "3.2s"
[[nodiscard]] std::string to_lower(std::string_view text);
[[nodiscard]] std::string_view trim(std::string_view text);

} // namespace npc::util

#include <chrono>
namespace npc::util {
// "2026-11-22T08:30:05Z"
[[nodiscard]] std::string format_utc(std::chrono::system_clock::time_point when);
[[nodiscard]] std::int64_t to_unix_seconds(std::chrono::system_clock::time_point when);
// "2026-11-22T08:30:05.123Z": to the millisecond, for records that order
// events less than a second apart.
[[nodiscard]] std::string format_utc_ms(std::chrono::system_clock::time_point when);
// A time in UTC as a user writes it: "2026-11-22T08:30:05Z" (format_utc's
// form; the Z may be left out; a fraction of a second, as format_utc_ms
// writes it, is kept), "2026-11-22 08:30:05", or a day alone, "2026-11-22"
// (its start). nullopt for anything else.
[[nodiscard]] std::optional<std::chrono::system_clock::time_point> parse_utc(std::string_view text);

// Whether `name` is one of `names` (the file names of a listing, say).
[[nodiscard]] bool contains(const std::vector<std::string>& names, std::string_view name);

} // namespace npc::util
