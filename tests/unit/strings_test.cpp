// util/strings: sizes, counts and durations as users type and read them.

#include <cstdint>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include <cstdlib>
#include <tuple>

#include <npc/util/error.hpp>

#include <npc/util/strings.hpp>

namespace npc::util {
namespace {

TEST(ParseBytes, PlainNumbers) {
  EXPECT_EQ(parse_bytes("0"), 0ULL);
  EXPECT_EQ(parse_bytes("1000"), 1000ULL);
  EXPECT_EQ(parse_bytes("100000000000"), 100'000'000'000ULL);
}

TEST(ParseBytes, DecimalSuffixesArePowersOf1000) {
  EXPECT_EQ(parse_bytes("64k"), 64'000ULL);
  EXPECT_EQ(parse_bytes("64kB"), 64'000ULL);
  EXPECT_EQ(parse_bytes("64K"), 64'000ULL);
  EXPECT_EQ(parse_bytes("3M"), 3'000'000ULL);
  EXPECT_EQ(parse_bytes("3MB"), 3'000'000ULL);
  EXPECT_EQ(parse_bytes("100GB"), 100'000'000'000ULL);
  EXPECT_EQ(parse_bytes("100g"), 100'000'000'000ULL);
  EXPECT_EQ(parse_bytes("1.5G"), 1'500'000'000ULL);
  EXPECT_EQ(parse_bytes("2T"), 2'000'000'000'000ULL);
  EXPECT_EQ(parse_bytes("2tb"), 2'000'000'000'000ULL);
}

TEST(ParseBytes, BinarySuffixesArePowersOf1024) {
  EXPECT_EQ(parse_bytes("2Ki"), 2048ULL);
  EXPECT_EQ(parse_bytes("2KiB"), 2048ULL);
  EXPECT_EQ(parse_bytes("512MiB"), 536'870'912ULL);
  EXPECT_EQ(parse_bytes("512mi"), 536'870'912ULL);
  EXPECT_EQ(parse_bytes("8GiB"), 8ULL << 30);
  EXPECT_EQ(parse_bytes("1.5GiB"), 1'610'612'736ULL);
  EXPECT_EQ(parse_bytes("1TiB"), 1ULL << 40);
}

TEST(ParseBytes, RejectsEverythingElse) {
  for (const char* text : {"12x", "", "1.5", "GB", "-5", "+5", "1 GB", " 1", "1e3", "1..5G", "1GBB",
                           "1KiBs", "0x10", "five"})
    EXPECT_EQ(parse_bytes(text), std::nullopt) << "[" << text << "]";
}

TEST(ParseNonNegative, DecimalNumbersOnly) {
  EXPECT_EQ(parse_non_negative("30"), 30.0);
  EXPECT_EQ(parse_non_negative("0.5"), 0.5);
  EXPECT_EQ(parse_non_negative("0"), 0.0);
  for (const char* text : {"", "-1", "abc", "1e2", "inf", "nan", "1,5", " 1"})
    EXPECT_EQ(parse_non_negative(text), std::nullopt) << "[" << text << "]";
}

TEST(ParseInteger, WithinBounds) {
  EXPECT_EQ(parse_integer("5", 0, 10), 5LL);
  EXPECT_EQ(parse_integer("0", 0, 10), 0LL);
  EXPECT_EQ(parse_integer("10", 0, 10), 10LL);
  EXPECT_EQ(parse_integer("-5", -5, 5), -5LL);
}

TEST(ParseInteger, OutOfBoundsOrMalformed) {
  EXPECT_EQ(parse_integer("11", 0, 10), std::nullopt);
  EXPECT_EQ(parse_integer("-1", 0, 10), std::nullopt);
  EXPECT_EQ(parse_integer("-6", -5, 5), std::nullopt);
  for (const char* text : {"", "3x", " 3", "3 ", "1.0", "+3", "99999999999999999999"})
    EXPECT_EQ(parse_integer(text, -1'000'000, 1'000'000), std::nullopt) << "[" << text << "]";
}

TEST(FormatBytes, DecimalUnitsWithOneDecimal) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(999), "999 B");
  EXPECT_EQ(format_bytes(1000), "1.0 kB");
  EXPECT_EQ(format_bytes(1'500'000), "1.5 MB");
  EXPECT_EQ(format_bytes(1'500'000'000), "1.5 GB");
  EXPECT_EQ(format_bytes(100'000'000'000ULL), "100.0 GB");
  EXPECT_EQ(format_bytes(2'000'000'000'000ULL), "2.0 TB");
}

TEST(FormatSeconds, SecondsMinutesHours) {
  EXPECT_EQ(format_seconds(0), "0.0s");
  EXPECT_EQ(format_seconds(3.2), "3.2s");
  EXPECT_EQ(format_seconds(59.5), "59.5s");
  EXPECT_EQ(format_seconds(60), "1m00s");
  EXPECT_EQ(format_seconds(65), "1m05s");
  EXPECT_EQ(format_seconds(3599), "59m59s");
  EXPECT_EQ(format_seconds(3600), "1h00m");
  EXPECT_EQ(format_seconds(3725), "1h02m");
  EXPECT_EQ(format_seconds(100 * 3600), "100h00m");
}

// Regression (fixed): format_bytes() picks the unit before rounding to one decimal, so a
// value just below the next unit prints as "1000.0 kB" (or "1000.0 MB")
// instead of "1.0 MB". Suggested fix: move to the next unit while the value
// would print as 1000.0 (value >= 999.95).
TEST(FormatBytes, JustBelowTheNextUnitRoundsIntoIt) {
  EXPECT_EQ(format_bytes(999'999), "1.0 MB");
  EXPECT_EQ(format_bytes(999'960'000), "1.0 GB");
}

// Regression (fixed): format_seconds() chooses the form before rounding, so 59.96 s prints
// as "60.0s" rather than "1m00s". Suggested fix: round to tenths first.
TEST(FormatSeconds, JustBelowAMinuteRoundsIntoMinutes) {
  EXPECT_EQ(format_seconds(59.96), "1m00s");
}

TEST(IsTruthy, TrueValues) {
  for (const char* text : {"1", "true", "TRUE", "True", "yes", "Yes", "on", "ON", " on "})
    EXPECT_TRUE(is_truthy(text)) << "[" << text << "]";
}

TEST(IsTruthy, FalseValues) {
  for (const char* text : {"0", "false", "no", "off", "", "2", "enabled", "y", "t", "onn"})
    EXPECT_FALSE(is_truthy(text)) << "[" << text << "]";
}

TEST(Strings, LowerAndTrim) {
  EXPECT_EQ(to_lower("AbC-1"), "abc-1");
  EXPECT_EQ(trim("  a b \t\n"), "a b");
  EXPECT_EQ(trim(" \t "), "");
}

TEST(Strings, UtcFormatting) {
  auto when = std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
  EXPECT_EQ(format_utc(when), "2023-11-14T22:13:20Z");
  EXPECT_EQ(to_unix_seconds(when), 1700000000);
}

TEST(Strings, UtcParsingTakesFormatUtcsFormAndADay) {
  const auto when = std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
  EXPECT_EQ(parse_utc("2023-11-14T22:13:20Z"), when);
  EXPECT_EQ(parse_utc(format_utc(when)), when);
  EXPECT_EQ(parse_utc("2023-11-14T22:13:20"), when);
  EXPECT_EQ(parse_utc("2023-11-14 22:13:20"), when);
  EXPECT_EQ(parse_utc(" 2023-11-14 "), std::chrono::system_clock::time_point(std::chrono::seconds(1699920000)));
  // To the millisecond, both ways.
  const auto later = when + std::chrono::milliseconds(45);
  EXPECT_EQ(format_utc_ms(later), "2023-11-14T22:13:20.045Z");
  EXPECT_EQ(parse_utc(format_utc_ms(later)), later);
  EXPECT_EQ(parse_utc("2023-11-14T22:13:20.5Z"), when + std::chrono::milliseconds(500));
  for (const char* bad : {"", "yesterday", "2023-13-01", "2023-11-14T25:00:00Z", "2023-11-14T22:13:20+02:00",
                          "1700000000", "2023-11-14T22:13:20.Z", "2023-11-14T22:13:20.x5Z", "2023-11-14.5"})
    EXPECT_FALSE(parse_utc(bad)) << bad;
}

TEST(PercentDecode, EscapesBecomeBytesAndTheRestStays) {
  EXPECT_EQ(percent_decode("a%20b%2Fc%ff").value(), std::string("a b/c\xff"));
  EXPECT_EQ(percent_decode("plain/path").value(), "plain/path");
  EXPECT_EQ(percent_decode("%41%62").value(), "Ab");
  EXPECT_EQ(percent_decode("%4").error(), "'%4' at position 1 is not a percent escape of a byte");
  EXPECT_EQ(percent_decode("x%g0").error(), "'%g0' at position 2 is not a percent escape of a byte");
  EXPECT_FALSE(percent_decode("%00"));
  EXPECT_FALSE(percent_decode("%"));
}

class EnvFlag : public ::testing::Test {
protected:
  void TearDown() override { ::unsetenv(kName); }
  static constexpr const char* kName = "NPC_TEST_ENV_FLAG";
  bool flag(const char* value) {
    ::setenv(kName, value, 1);
    return env_flag(kName);
  }
};

TEST_F(EnvFlag, UnsetAndTheUsualWordsAreRead) {
  ::unsetenv(kName);
  EXPECT_FALSE(env_flag(kName));
  for (const char* no : {"", "0", "false", "No", "OFF", " 0 "}) EXPECT_FALSE(flag(no)) << no;
  for (const char* yes : {"1", "true", "YES", "on", " 1"}) EXPECT_TRUE(flag(yes)) << yes;
}

TEST_F(EnvFlag, AnythingElseIsAUsageErrorNamingTheVariableAndValue) {
  try {
    std::ignore = flag("maybe");
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_EQ(e.code(), ExitCode::usage);
    EXPECT_EQ(std::string(e.what()),
              "NPC_TEST_ENV_FLAG=maybe: not a yes/no value; set it to 1 (yes) or 0 (no), or unset it");
  }
  EXPECT_THROW(std::ignore = flag("2"), UsageError);
}

} // namespace
} // namespace npc::util
