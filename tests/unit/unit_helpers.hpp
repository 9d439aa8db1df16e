#pragma once
// Small helpers shared by the unit tests: fixed points in time, entry
// directories with files of known sizes, reading back what was written.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/key.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/fs.hpp>

#include "test_support.hpp"

namespace npc::unit {

namespace fs = std::filesystem;

// A wall-clock instant from Unix seconds.
inline util::WallTime at_unix(std::int64_t seconds) {
  return util::WallTime(std::chrono::duration_cast<util::WallTime::duration>(std::chrono::seconds(seconds)));
}

// 2027-01-15T08:00:00Z: every fake clock in these tests starts here.
inline constexpr std::int64_t kT0 = 1800000000;

inline void set_time(const fs::path& path, util::WallTime when) {
  auto status = util::set_mtime(path, when);
  ASSERT_TRUE(status.ok()) << status.error();
}

inline util::WallTime file_time(const fs::path& path) {
  auto when = util::mtime(path);
  EXPECT_TRUE(when.ok()) << (when.ok() ? "" : when.error());
  return when.ok() ? *when : util::WallTime{};
}

// A key whose hashes are the given hex digit repeated (20 and 8 digits).
inline cache::CacheKey repeated_key(const std::string& version, char graph_digit, char flags_digit) {
  return cache::CacheKey{version, std::string(cache::kGraphHashDigits, graph_digit),
                         std::string(cache::kFlagsHashDigits, flags_digit)};
}

// Names of the files in a directory, sorted (empty when it does not exist).
using test::names_in;

} // namespace npc::unit
