// cache/usage_shard: the text of one file of the usage counters, read
// strictly. Values no count of ours can reach (a negative count, 1e30, a
// compile time of millions of years, a reset before 1970 or after 2100) make
// the text torn, with why; sums stop at the largest value rather than wrap.

#include <npc/cache/usage_shard.hpp>

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace npc::cache {
namespace {

TEST(UsageShard, EmptyTextCountsNothing) {
  auto shard = parse_usage_shard("");
  ASSERT_TRUE(shard.ok()) << shard.error();
  EXPECT_TRUE(shard->by_program.empty());
  EXPECT_EQ(shard->zeroed_unix, 0);
}

TEST(UsageShard, WhatIsWrittenReadsBackTheSame) {
  UsageShard shard;
  shard.zeroed_unix = 1'790'000'000;
  UsageCounts& c = shard.by_program["neuron_cc_wrapper"];
  c.hits = 3;
  c.hits_without_time = 1;
  c.misses = 2;
  c.failed = 1;
  c.compile_seconds = 12.5;
  c.saved_seconds = 37.25;
  const std::string text = serialize_usage_shard(shard);
  auto back = parse_usage_shard(text);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->zeroed_unix, shard.zeroed_unix);
  const UsageCounts& r = back->by_program.at("neuron_cc_wrapper");
  EXPECT_EQ(r.hits, 3u);
  EXPECT_EQ(r.hits_without_time, 1u);
  EXPECT_EQ(r.misses, 2u);
  EXPECT_EQ(r.failed, 1u);
  EXPECT_EQ(r.compile_seconds, 12.5);
  EXPECT_EQ(r.saved_seconds, 37.25);
  EXPECT_EQ(serialize_usage_shard(*back), text);
}

// Each text is torn, for the reason given.
TEST(UsageShard, ValuesOutOfRangeAreTorn) {
  const std::vector<std::pair<std::string, std::string>> torn = {
      {R"({"programs":{"p":{"hits":-5}}})", "'p' has hits -5, not a count from 0 to 2^53"},
      {R"({"programs":{"p":{"misses":1e30}}})", "'p' has misses 1e+30, not a count from 0 to 2^53"},
      {R"({"programs":{"p":{"failed":1.5}}})", "'p' has failed 1.5, not a count from 0 to 2^53"},
      {R"({"programs":{"p":{"hits":"3"}}})", "'p' has hits \"3\", not a count from 0 to 2^53"},
      {R"({"programs":{"p":{"hits":9007199254740993}}})",
       "'p' has hits 9007199254740993, not a count from 0 to 2^53"},
      {R"({"programs":{"p":{"compile_seconds":9.3e18}}})",
       "'p' has compile_seconds 9.3e+18, not a number of seconds from 0 to 1e13"},
      {R"({"programs":{"p":{"saved_seconds":-1}}})",
       "'p' has saved_seconds -1, not a number of seconds from 0 to 1e13"},
      {R"({"programs":{"p":{"saved_seconds":null}}})",
       "'p' has saved_seconds null, not a number of seconds from 0 to 1e13"},
      {R"({"programs":{"p":{"hits":1,"hits_without_time":2}}})",
       "'p' has more hits without a time (2) than hits (1)"},
      {R"({"programs":{"p":7}})", "the counters of 'p' are not an object"},
      {R"({"programs":[]})", "'programs' is not an object"},
      {R"({"zeroed_unix":-2556057600})", "zeroed_unix -2556057600 is not a time from 1970 to 2100"},
      {R"({"zeroed_unix":9223372036854775807})", "zeroed_unix 9223372036854775807 is not a time from 1970 to 2100"},
      {R"({"zeroed_unix":1.5e9})", "zeroed_unix 1500000000.0 is not a time from 1970 to 2100"},
      {R"([1,2])", "not a JSON object"},
      {R"({"programs": {"neuron_cc_wr)", "not valid JSON (a write cut short, or not ours)"},
  };
  for (const auto& [text, why] : torn) {
    auto parsed = parse_usage_shard(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.error(), why) << text;
  }
}

TEST(UsageShard, TheLargestValuesAreInRange) {
  auto largest = parse_usage_shard(R"({"programs":{"p":{"hits":9007199254740992,"compile_seconds":1e13}},)"
                                   R"("zeroed_unix":4102444800})");
  ASSERT_TRUE(largest.ok()) << largest.error();
  EXPECT_EQ(largest->by_program.at("p").hits, kMaxUsageCount);
  EXPECT_EQ(largest->by_program.at("p").compile_seconds, kMaxUsageSeconds);
  EXPECT_EQ(largest->zeroed_unix, kMaxZeroedUnix);
}

// A sum stops at the largest value rather than wrap (or leave the range a
// shard may hold, so that what is written back stays readable).
TEST(UsageShard, SumsStopAtTheLargestValue) {
  UsageCounts sum;
  sum.hits = kMaxUsageCount - 1;
  sum.saved_seconds = kMaxUsageSeconds - 1;
  UsageCounts more;
  more.hits = 5;
  more.saved_seconds = 1e12;
  sum += more;
  EXPECT_EQ(sum.hits, kMaxUsageCount);
  EXPECT_EQ(sum.saved_seconds, kMaxUsageSeconds);
  more.hits = kMaxUsageCount;
  sum += more;
  EXPECT_EQ(sum.hits, kMaxUsageCount);
  UsageShard shard;
  shard.by_program["p"] = sum;
  EXPECT_TRUE(parse_usage_shard(serialize_usage_shard(shard)).ok());
}

} // namespace
} // namespace npc::cache
