// The compile entry's protocol (cli/cached_compile.hpp) on a directory
// cache, with a compiler that is a shell script counting its runs: the
// order the cache is asked in, what a hit and a compile count, and what
// happens before anything is stored.

#include <npc/cli/cached_compile.hpp>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/key.hpp>
#include <npc/cli/neff_output.hpp>
#include <npc/util/sha256.hpp>

#include "files.hpp"
#include "temp_dir.hpp"
#include "two_tiers.hpp"

namespace npc::cli {
namespace {

constexpr const char* kCachedCompileVersion = "2.0.0";
const std::string kCachedCompileGraph = "HloModule cached_compile_test\n";

class CachedCompileTest : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    cache.emplace(dir() / "cache");
    ASSERT_TRUE(cache->ensure_root().ok());
    // neuronx-cc compile --framework=XLA GRAPH --output NEFF FLAGS...: one
    // line per run, and a NEFF (or exit 70 when told to fail).
    compiler = dir() / "neuronx-cc";
    test::write_executable(compiler, "#!/bin/sh\necho \"$3\" >> " + (dir() / "runs").string() +
                                         "\n[ -e " + (dir() / "fail").string() + " ] && exit 70\n"
                                         "printf 'NEFF of %s' \"$3\" > \"$5\"\n");
    key = cache::make_key(util::sha256_hex(kCachedCompileGraph), {}, kCachedCompileVersion);
  }

  [[nodiscard]] std::size_t compiler_runs() const { return test::count_lines(dir() / "runs"); }

  // The protocol's call for `key` into dir()/out.neff; what it counted goes
  // into `counted`, whether before_compile ran into `checked`.
  CachedCompileEnd run(compile::EntryCompileOptions options = {}) {
    const cache::Tiers directory_only(cache->root(), std::nullopt);
    compile::CacheTiers tiers(directory_only, compile::CacheTiers::Unusable::fail);
    options.compiler = compiler;
    const cache::Entry entry = cache->entry(key);
    CachedCompile call{
        .tiers = tiers,
        .lookup = {.key = key,
                   .legacy_key = legacy_key,
                   .secondary_root = [this] { return secondary_root; },
                   .lock_wait = std::chrono::seconds(5)},
        .eviction = eviction,
        .deliver =
            [this](const cache::Entry& done) {
              if (refuse_delivery) return false;
              auto integrity = deliver_neff(done, output());
              return integrity && *integrity == cache::Integrity::ok;
            },
        .store_graph = [&] { ASSERT_TRUE(entry.store_graph(kCachedCompileGraph, {}).ok()); },
        .before_compile =
            [this] {
              ++checked;
              if (refuse_compile) throw std::runtime_error("refused");
            },
        .count = [this](const cache::UsageCounts& delta) { counted += delta; },
    };
    return compile_through_cache(call, options);
  }

  [[nodiscard]] fs::path output() const { return dir() / "out.neff"; }

  // A done entry of `k` in `in`, with `neff` as its NEFF.
  void publish_done(const cache::Cache& in, const cache::CacheKey& k, const std::string& neff) {
    const cache::Entry entry = in.entry(k);
    ASSERT_TRUE(entry.store_graph(kCachedCompileGraph, {}).ok());
    test::publish_test_result(entry, true, neff, dir() / "result");
  }

  std::optional<cache::Cache> cache;
  fs::path compiler;
  cache::CacheKey key;
  std::optional<cache::CacheKey> legacy_key;
  std::optional<fs::path> secondary_root;
  cache::EvictionPolicy eviction{std::uint64_t{1} << 40, std::chrono::seconds(0)};
  cache::UsageCounts counted;
  int checked = 0;
  bool refuse_compile = false;
  bool refuse_delivery = false; // as for a NEFF that cannot be read
};

TEST_F(CachedCompileTest, AMissCompilesOnceAndTheNextCallIsAHit) {
  CachedCompileEnd first = run();
  EXPECT_FALSE(first.served);
  EXPECT_EQ(first.result.outcome, compile::EntryOutcome::compiled);
  EXPECT_EQ(compiler_runs(), 1u);
  EXPECT_EQ(test::read_text(output()), "NEFF of " + cache->entry(key).graph_path().string());
  EXPECT_EQ(counted.misses, 1u);
  EXPECT_EQ(counted.hits, 0u);
  EXPECT_EQ(checked, 1);

  fs::remove(output());
  CachedCompileEnd second = run();
  ASSERT_TRUE(second.served);
  EXPECT_EQ(second.served->dir(), cache->entry(key).dir());
  EXPECT_EQ(compiler_runs(), 1u);
  EXPECT_EQ(counted.hits, 1u);
  EXPECT_EQ(checked, 1); // a hit checks nothing a compile needs
  EXPECT_TRUE(fs::exists(output()));
}

// With a limit of 0 bytes the eviction after the compile removes the entry
// at once: the NEFF reached the output all the same, copied while the
// entry's lock was held.
TEST_F(CachedCompileTest, TheNeffReachesTheOutputBeforeTheEvictionAfterTheCompile) {
  eviction = {0, std::chrono::seconds(0)};
  EXPECT_EQ(run().result.outcome, compile::EntryOutcome::compiled);
  EXPECT_EQ(test::read_text(output()), "NEFF of " + cache->entry(key).graph_path().string());
  EXPECT_FALSE(fs::exists(cache->entry(key).dir()));
}

TEST_F(CachedCompileTest, AnEarlierReleasesEntryIsServedWhenOursIsNotDone) {
  legacy_key = cache::legacy_key(util::sha256_hex(kCachedCompileGraph), {}, kCachedCompileVersion);
  ASSERT_NE(*legacy_key, key);
  publish_done(*cache, *legacy_key, "legacy NEFF");
  CachedCompileEnd end = run();
  ASSERT_TRUE(end.served);
  EXPECT_EQ(end.served->dir(), cache->entry(*legacy_key).dir());
  EXPECT_EQ(test::read_text(output()), "legacy NEFF");
  EXPECT_EQ(compiler_runs(), 0u);
  EXPECT_FALSE(cache->entry(key).looks_done());
}

TEST_F(CachedCompileTest, TheSecondaryCachesResultIsCopiedInAndServed) {
  cache::Cache secondary(dir() / "secondary");
  ASSERT_TRUE(secondary.ensure_root().ok());
  publish_done(secondary, key, "secondary NEFF");
  secondary_root = dir() / "secondary";
  CachedCompileEnd end = run();
  ASSERT_TRUE(end.served);
  EXPECT_EQ(end.served->dir(), cache->entry(key).dir()); // now done here
  EXPECT_TRUE(cache->entry(key).looks_done());
  EXPECT_EQ(test::read_text(output()), "secondary NEFF");
  EXPECT_EQ(compiler_runs(), 0u);
  EXPECT_EQ(counted.hits, 1u);
}

TEST_F(CachedCompileTest, ACachedFailureIsGivenUnlessFailuresAreRetried) {
  test::write_text(dir() / "fail", "");
  compile::EntryCompileOptions options;
  options.retry_failed = false;
  EXPECT_EQ(run(options).result.outcome, compile::EntryOutcome::failed);
  EXPECT_EQ(compiler_runs(), 1u);
  ASSERT_TRUE(cache->entry(key).looks_failed());

  counted = {};
  EXPECT_EQ(run(options).result.outcome, compile::EntryOutcome::cached_failure);
  EXPECT_EQ(compiler_runs(), 1u);
  EXPECT_EQ(counted.failed, 1u);

  fs::remove(dir() / "fail");
  options.retry_failed = true;
  EXPECT_EQ(run(options).result.outcome, compile::EntryOutcome::compiled);
  EXPECT_EQ(compiler_runs(), 2u);
  EXPECT_TRUE(fs::exists(output()));
}

TEST_F(CachedCompileTest, WhatACompileNeedsIsCheckedBeforeTheGraphIsStored) {
  refuse_compile = true;
  EXPECT_THROW(static_cast<void>(run()), std::runtime_error);
  EXPECT_EQ(checked, 1);
  EXPECT_FALSE(fs::exists(cache->entry(key).graph_path()));
  EXPECT_EQ(compiler_runs(), 0u);
}

// A done entry whose NEFF fails its record (a corrupt cache) is no hit: its
// compile, under the entry's lock, finds it so and compiles it again.
TEST_F(CachedCompileTest, ADoneEntryWhoseNeffFailsItsRecordIsCompiledAgain) {
  publish_done(*cache, key, "NEFF");
  test::write_text(cache->entry(key).neff_path(), "not the NEFF its record names");
  CachedCompileEnd end = run();
  EXPECT_FALSE(end.served);
  EXPECT_EQ(end.result.outcome, compile::EntryOutcome::compiled);
  EXPECT_EQ(compiler_runs(), 1u);
  EXPECT_EQ(test::read_text(output()), "NEFF of " + cache->entry(key).graph_path().string());
}

// A done entry whose NEFF cannot be delivered even under its lock (it
// cannot be read): the protocol's own fault, not an EnvironmentError, which
// the tiers would take for a shared tier that cannot be used (and drop it).
TEST_F(CachedCompileTest, ADoneEntryThatCannotBeDeliveredIsTheProtocolsOwnFault) {
  publish_done(*cache, key, "NEFF");
  refuse_delivery = true;
  try {
    static_cast<void>(run());
    FAIL() << "a NEFF that could not be delivered was taken";
  } catch (const EnvironmentError& e) {
    FAIL() << "thrown as an unusable tier's error: " << e.what();
  } catch (const StoredNeffFault& e) {
    EXPECT_NE(std::string(e.what()).find("fails its check"), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), ExitCode::environment);
  }
  EXPECT_EQ(compiler_runs(), 0u);
  EXPECT_EQ(counted.hits, 0u);
}

TEST_F(CachedCompileTest, AnOutputThatCannotTakeTheNeffStopsAHitWithoutACompile) {
  publish_done(*cache, key, "NEFF");
  test::write_text(dir() / "file", "");
  const fs::path unwritable = dir() / "file" / "out.neff"; // a file where a folder belongs
  const cache::Tiers directory_only(cache->root(), std::nullopt);
  compile::CacheTiers tiers(directory_only, compile::CacheTiers::Unusable::fail);
  CachedCompile call{.tiers = tiers,
                     .lookup = {.key = key, .legacy_key = std::nullopt, .secondary_root = {},
                                .lock_wait = std::chrono::seconds(5)},
                     .eviction = {},
                     .deliver =
                         [&](const cache::Entry& done) {
                           auto integrity = deliver_neff(done, unwritable);
                           return integrity && *integrity == cache::Integrity::ok;
                         },
                     .store_graph = [] { FAIL() << "nothing is stored for an output that cannot be written"; },
                     .before_compile = {},
                     .count = [](const cache::UsageCounts&) {}};
  compile::EntryCompileOptions options;
  options.compiler = compiler;
  EXPECT_THROW(static_cast<void>(compile_through_cache(call, options)), OutputFault);
  EXPECT_EQ(compiler_runs(), 0u);
}

} // namespace
} // namespace npc::cli
