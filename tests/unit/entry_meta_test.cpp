// cache/entry_meta: npc-entry.json and compile_flags.json, read strictly.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/key.hpp>
#include <npc/cache/layout.hpp>

#include "test_support.hpp"

namespace npc::cache {
namespace {

AttemptRecord attempt(int n, const std::string& outcome, double seconds, std::uint64_t peak) {
  AttemptRecord r;
  r.attempt = n;
  r.outcome = outcome;
  r.exit = outcome == "success" ? "exit code 0" : "killed by signal SIGKILL";
  r.exit_code = outcome == "success" ? 0 : -1;
  r.signal = outcome == "success" ? "" : "SIGKILL";
  r.wall_seconds = seconds;
  r.peak_rss_bytes = peak;
  r.started_unix = 1700000000 + n;
  return r;
}

void expect_same(const AttemptRecord& a, const AttemptRecord& b) {
  EXPECT_EQ(a.attempt, b.attempt);
  EXPECT_EQ(a.outcome, b.outcome);
  EXPECT_EQ(a.exit, b.exit);
  EXPECT_EQ(a.exit_code, b.exit_code);
  EXPECT_EQ(a.signal, b.signal);
  EXPECT_EQ(a.wall_seconds, b.wall_seconds);
  EXPECT_EQ(a.peak_rss_bytes, b.peak_rss_bytes);
  EXPECT_EQ(a.started_unix, b.started_unix);
}

EntryMeta sample_meta() {
  EntryMeta meta;
  meta.neff_sha256 = "25600cf2a6729dc251b36588ae87d6f0d1017e7b3412178eddbeabbb12f8d9a7";
  meta.neff_bytes = 21;
  meta.graph_bytes = 123456789012ULL;
  meta.attempts = {attempt(1, "failed", 2.25, 7ULL << 30), attempt(2, "success", 61.5, 3ULL << 30)};
  return meta;
}

TEST(EntryMeta, SerializeParseRoundTrip) {
  EntryMeta meta = sample_meta();
  auto parsed = parse_entry_meta(serialize_entry_meta(meta));
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_EQ(parsed->neff_sha256, meta.neff_sha256);
  EXPECT_EQ(parsed->neff_bytes, meta.neff_bytes);
  EXPECT_EQ(parsed->graph_bytes, meta.graph_bytes);
  ASSERT_EQ(parsed->attempts.size(), 2U);
  expect_same(parsed->attempts[0], meta.attempts[0]);
  expect_same(parsed->attempts[1], meta.attempts[1]);
}

TEST(EntryMeta, RoundTripWithoutNeffRecord) {
  EntryMeta meta;
  meta.graph_bytes = 5;
  auto parsed = parse_entry_meta(serialize_entry_meta(meta));
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_FALSE(parsed->neff_sha256.has_value());
  EXPECT_FALSE(parsed->neff_bytes.has_value());
  EXPECT_EQ(parsed->graph_bytes, 5U);
  EXPECT_TRUE(parsed->attempts.empty());
}

TEST(EntryMeta, EmptyObjectIsAnEmptyRecord) {
  auto parsed = parse_entry_meta("{}");
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_FALSE(parsed->neff_sha256.has_value());
  EXPECT_EQ(parsed->graph_bytes, 0U);
  EXPECT_TRUE(parsed->attempts.empty());
}

TEST(EntryMeta, WrongTypesAreRejected) {
  for (const char* text : {
           "",
           "not json",
           "[]",
           "\"text\"",
           "42",
           R"({"graph_bytes":"12"})",
           R"({"graph_bytes":1.5})",
           R"({"neff":[]})",
           R"({"neff":"abc"})",
           R"({"neff":{"sha256":5}})",
           R"({"neff":{"bytes":"21"}})",
           R"({"attempts":{}})",
           R"({"attempts":[1]})",
           R"({"attempts":[{"outcome":3}]})",
           R"({"attempts":[{"wall_seconds":"x"}]})",
           R"({"attempts":[{"exit_code":1.5}]})",
           R"({"attempts":[{"attempt":"1"}]})",
           R"({"attempts":[{"peak_rss_bytes":null}]})",
           R"({"attempts":[{"signal":false}]})",
           R"({"attempts":[{"started_unix":[]}]})",
       }) {
    EXPECT_FALSE(parse_entry_meta(text).ok()) << "[" << text << "]";
  }
}

// Whose words key the entry: written only for the masquerade's attempts, so
// that every record without it (all before it) reads as NEURON_CC_FLAGS's.
TEST(EntryMeta, FlagsOriginIsTheLastAttemptsAndAbsentMeansNeuronCcFlags) {
  EntryMeta meta;
  EXPECT_EQ(meta.flags_origin(), FlagsOrigin::neuron_cc_flags) << "no attempt: the framework's entry";
  meta.attempts = {attempt(1, "success", 2.0, 10)};
  std::string text = serialize_entry_meta(meta);
  EXPECT_EQ(text.find("flags_from"), std::string::npos) << text;
  EXPECT_EQ(parse_entry_meta(text)->flags_origin(), FlagsOrigin::neuron_cc_flags);
  meta.attempts.back().flags_from = FlagsOrigin::compiler_command_line;
  text = serialize_entry_meta(meta);
  EXPECT_NE(text.find("\"flags_from\": \"neuronx-cc command line\""), std::string::npos) << text;
  auto back = parse_entry_meta(text);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->flags_origin(), FlagsOrigin::compiler_command_line);
  EXPECT_EQ(serialize_entry_meta(*back), text);
  // A value this release does not know keys the entry as before it; a
  // value of the wrong type is a corrupt record, as any other field's.
  EXPECT_EQ(parse_entry_meta(R"({"attempts":[{"attempt":1,"flags_from":"a later release's"}]})")->flags_origin(),
            FlagsOrigin::neuron_cc_flags);
  EXPECT_FALSE(parse_entry_meta(R"({"attempts":[{"attempt":1,"flags_from":7}]})").ok());
}

TEST(EntryMeta, IntegerWallSecondsAreAccepted) {
  auto parsed = parse_entry_meta(R"({"attempts":[{"outcome":"success","wall_seconds":3}]})");
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  ASSERT_EQ(parsed->attempts.size(), 1U);
  EXPECT_EQ(parsed->attempts[0].wall_seconds, 3.0);
}

TEST(EntryMeta, LastSuccessIsTheLatestSuccessfulAttempt) {
  EntryMeta meta;
  EXPECT_EQ(meta.last_success(), nullptr);
  meta.attempts = {attempt(1, "success", 10, 1), attempt(2, "failed", 20, 2),
                   attempt(3, "success", 30, 3), attempt(4, "timeout", 40, 4)};
  ASSERT_NE(meta.last_success(), nullptr);
  EXPECT_EQ(meta.last_success()->attempt, 3);
  EXPECT_EQ(meta.last_success(), &meta.attempts[2]);
  meta.attempts = {attempt(1, "failed", 1, 1), attempt(2, "interrupted", 1, 1)};
  EXPECT_EQ(meta.last_success(), nullptr);
}

TEST(EntryMeta, TheRunAnAttemptWasMadeInRoundTripsAndOnlyThenIsWritten) {
  EntryMeta meta;
  meta.attempts = {attempt(1, "timeout", 3, 1)};
  EXPECT_EQ(serialize_entry_meta(meta).find("\"run\""), std::string::npos); // as older releases wrote it
  meta.attempts[0].run = "slurm step 4711.0";
  meta.attempts[0].by = "task 1/4 vm";
  meta.attempts[0].last = true;
  auto parsed = parse_entry_meta(serialize_entry_meta(meta));
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  ASSERT_EQ(parsed->attempts.size(), 1U);
  EXPECT_EQ(parsed->attempts[0].run, "slurm step 4711.0");
  EXPECT_EQ(parsed->attempts[0].by, "task 1/4 vm");
  EXPECT_TRUE(parsed->attempts[0].last);
  EXPECT_FALSE(parse_entry_meta(R"({"attempts":[{"last":1}]})").ok());
  EXPECT_FALSE(parse_entry_meta(R"({"attempts":[{"run":7}]})").ok());
}

TEST(EntryMeta, AGraphFailsForGoodInARunOnlyByThatRunsLastFailureOrTimeout) {
  const std::string run = "slurm step 4711.0";
  auto in_run = [&](AttemptRecord a, bool last) {
    a.signal = ""; // attempt() makes every failure a kill
    a.exit = "exit code 1";
    a.run = run;
    a.by = "task 1/4 vm";
    a.last = last;
    return a;
  };
  EntryMeta meta;
  EXPECT_EQ(meta.failed_for_good_in(run), nullptr); // no attempt
  meta.attempts = {in_run(attempt(1, "timeout", 3, 1), true)};
  meta.attempts[0].signal = "SIGKILL"; // how our timeout ends a compile
  ASSERT_NE(meta.failed_for_good_in(run), nullptr);
  EXPECT_EQ(meta.failed_for_good_in(run), &meta.attempts[0]);
  EXPECT_EQ(meta.failed_for_good_in("slurm step 4711.1"), nullptr); // another step
  EXPECT_EQ(meta.failed_for_good_in(""), nullptr);                  // no run at all
  meta.attempts = {in_run(attempt(1, "failed", 3, 1), true)};
  EXPECT_NE(meta.failed_for_good_in(run), nullptr);
  meta.attempts = {in_run(attempt(1, "failed", 3, 1), false)}; // its launcher retries it
  EXPECT_EQ(meta.failed_for_good_in(run), nullptr);
  AttemptRecord killed = in_run(attempt(1, "failed", 3, 1), true);
  killed.signal = "SIGKILL"; // the OOM killer's: about the host, not the graph
  meta.attempts = {killed};
  EXPECT_EQ(meta.failed_for_good_in(run), nullptr);
  // Only the last attempt counts: a success since (a retry elsewhere) ends it.
  meta.attempts = {in_run(attempt(1, "failed", 3, 1), true), attempt(2, "success", 3, 1)};
  EXPECT_EQ(meta.failed_for_good_in(run), nullptr);
  meta.attempts = {in_run(attempt(1, "interrupted", 3, 1), true)};
  EXPECT_EQ(meta.failed_for_good_in(run), nullptr);
}

class EntryMetaFileTest : public test::TempDirTest {};

TEST_F(EntryMetaFileTest, MissingFileIsAnEmptyRecord) {
  auto meta = read_entry_meta(dir());
  ASSERT_TRUE(meta.ok()) << meta.error();
  EXPECT_FALSE(meta->neff_sha256.has_value());
  EXPECT_TRUE(meta->attempts.empty());
}

TEST_F(EntryMetaFileTest, WriteThenRead) {
  ASSERT_TRUE(write_entry_meta(dir(), sample_meta()).ok());
  EXPECT_TRUE(fs::is_regular_file(dir() / kMetaFile));
  auto meta = read_entry_meta(dir());
  ASSERT_TRUE(meta.ok()) << meta.error();
  EXPECT_EQ(meta->neff_bytes, 21U);
  ASSERT_EQ(meta->attempts.size(), 2U);
  expect_same(meta->attempts[1], sample_meta().attempts[1]);
  // Written atomically: no temp file is left beside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir()), fs::directory_iterator()), 1);
}

TEST_F(EntryMetaFileTest, CorruptFileIsAnErrorNamingIt) {
  test::write_text(dir() / kMetaFile, "{\"graph_bytes\": \"many\"}");
  auto meta = read_entry_meta(dir());
  ASSERT_FALSE(meta.ok());
  EXPECT_NE(meta.error().find((dir() / kMetaFile).string()), std::string::npos) << meta.error();
  EXPECT_NE(meta.error().find("corrupt"), std::string::npos) << meta.error();
}

TEST(CompileFlags, ArraysOfStringsOnly) {
  auto flags = parse_compile_flags(R"(["-O2", "--opt=a b", ""])");
  ASSERT_TRUE(flags.ok()) << flags.error();
  EXPECT_EQ(*flags, (std::vector<std::string>{"-O2", "--opt=a b", ""}));
  auto empty = parse_compile_flags("[]");
  ASSERT_TRUE(empty.ok()) << empty.error();
  EXPECT_TRUE(empty->empty());
  for (const char* text : {"", "nope", R"(["a", 1])", R"({"a": 1})", R"("-O2")", "[null]",
                           R"([["a"]])", "[true]", R"(["a",)"})
    EXPECT_FALSE(parse_compile_flags(text).ok()) << "[" << text << "]";
}

// The text stands in for another entry's flags only when its flags hash to
// the key's hash, however it is written (torch-neuronx's spacing or ours).
TEST(CompileFlags, HashToTheKeysHashOnlyWhenTheFlagsDo) {
  const std::string hash = flags_hash({"-O2", "--lnc=2"});
  EXPECT_TRUE(compile_flags_hash_to("[\"-O2\",\"--lnc=2\"]\n", hash));
  EXPECT_TRUE(compile_flags_hash_to("[\"-O2\", \"--lnc=2\"]", hash));
  EXPECT_FALSE(compile_flags_hash_to("[\"-O2\"]", hash));
  EXPECT_FALSE(compile_flags_hash_to("[\"--lnc=2\", \"-O2\"]", hash)) << "order is part of the flags";
  EXPECT_FALSE(compile_flags_hash_to("not json", hash));
}

TEST(CompileFlags, SerializeRoundTrip) {
  const std::vector<std::string> flags = {"-O2", R"(say "hi")", "back\\slash", "new\nline", "ü", ""};
  EXPECT_EQ(serialize_compile_flags({"-O2", "a b"}), "[\"-O2\",\"a b\"]\n");
  auto parsed = parse_compile_flags(serialize_compile_flags(flags));
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_EQ(*parsed, flags);
}

TEST_F(EntryMetaFileTest, ReadCompileFlags) {
  test::write_text(dir() / kFlagsFile, "[\"--target=trn1\"]\n");
  auto flags = read_compile_flags(dir());
  ASSERT_TRUE(flags.ok()) << flags.error();
  EXPECT_EQ(*flags, std::vector<std::string>{"--target=trn1"});
  test::write_text(dir() / kFlagsFile, "[1]");
  auto bad = read_compile_flags(dir());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find((dir() / kFlagsFile).string()), std::string::npos) << bad.error();
  fs::remove(dir() / kFlagsFile);
  EXPECT_FALSE(read_compile_flags(dir()).ok());
}

} // namespace
} // namespace npc::cache
