// launcher/pool: the pool's decisions with no processes and plain-number time.

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/launcher/lane_plan.hpp>
#include <npc/launcher/pool.hpp>
#include <npc/cluster/share_owner.hpp>

namespace npc::launcher {
namespace {

constexpr std::uint64_t GB = 1'000'000'000ULL;

WorkItem item(const std::string& key, double seconds, std::uint64_t peak = 0, bool own = true) {
  WorkItem w;
  w.entry_dir = fs::path("/cache/neuronxcc-1.0") / key;
  w.key = key;
  w.graph_bytes = 1000;
  w.predicted.seconds = seconds;
  w.predicted.peak_bytes = peak;
  w.own_share = own;
  return w;
}

AttemptInfo ended(const std::string& exit, double seconds = 1, std::uint64_t peak = 0) {
  AttemptInfo info;
  info.exit = exit;
  info.wall_seconds = seconds;
  info.peak_rss_bytes = peak;
  return info;
}

TEST(Pool, OrderIsOwnShareFirstThenCostliestFirst) {
  Pool pool({item("a", 10), item("b", 100, 0, false), item("c", 50), item("d", 20, 0, false),
             item("e", 50), item("f", 100, 0, false)},
            {4, 0, 0});
  // Own share (a, c, e) before the rest (b, d, f); the key breaks ties.
  EXPECT_EQ(pool.order(), (std::vector<std::size_t>{2, 4, 0, 1, 5, 3}));
  EXPECT_EQ(pool.pick(0), std::optional<std::size_t>(2));
}

// Launchers sharing a cache each pick among the graphs within the band of
// the costliest ready one, by their own seed: never outside the band, and
// different seeds take different graphs of it.
TEST(Pool, SpreadPicksStayWithinTheBandAndDifferBySeed) {
  std::set<std::size_t> picked;
  for (std::uint64_t seed = 0; seed < 64; ++seed) {
    Pool pool({item("a", 100), item("b", 95), item("c", 90), item("d", 80), item("e", 50), item("f", 99, 0, false)},
              {4, 0, 0});
    pool.spread_picks(seed, 0.1);
    auto first = pool.pick(0);
    ASSERT_TRUE(first.has_value());
    // a, b, c: within 10% of a; d and e below it; f is not the own share.
    EXPECT_LE(*first, 2u) << "seed " << seed;
    picked.insert(*first);
    // The same seed picks the same graph again until it starts.
    EXPECT_EQ(pool.pick(0), first);
    pool.start(*first, 0);
    auto second = pool.pick(0);
    ASSERT_TRUE(second.has_value());
    EXPECT_LE(*second, 2u);
    EXPECT_NE(*second, *first);
  }
  EXPECT_EQ(picked, (std::set<std::size_t>{0, 1, 2}));
}

// Sixteen launchers over 128 graphs of one cost start mostly different ones
// (without spreading, all sixteen start the same one).
TEST(Pool, SpreadPicksOfManyLaunchersRarelyMeet) {
  std::vector<WorkItem> items;
  for (int i = 0; i < 128; ++i) items.push_back(item("g" + std::to_string(i), 10));
  std::set<std::size_t> firsts;
  for (std::uint64_t launcher = 0; launcher < 16; ++launcher) {
    Pool pool(items, {8, 0, 0});
    pool.spread_picks(0x5eed0000 + launcher * 7919, kSpreadBand);
    firsts.insert(*pool.pick(0));
  }
  EXPECT_GE(firsts.size(), 13u);
  Pool plain(items, {8, 0, 0});
  EXPECT_EQ(plain.pick(0), std::optional<std::size_t>(0));
}

// Costs known from history are planned: on 2 slots, 3 3 2 2 2 end at 6
// planned (3+3, 2+2+2), at 7 longest first. A launcher that spreads its
// picks keeps them longest first (other hosts take from the same list).
TEST(Pool, SpreadPicksAreNotPlanned) {
  std::vector<WorkItem> items;
  for (double cost : {3, 3, 2, 2, 2}) {
    items.push_back(item("h" + std::to_string(items.size()), cost));
    items.back().predicted.from_history = true;
  }
  const std::vector<std::size_t> longest_first = {0, 1, 2, 3, 4};
  Pool planned(items, {2, 0, 0});
  EXPECT_NE(planned.order(), longest_first) << "the plan this test relies on";
  Pool spread(items, {2, 0, 0});
  spread.spread_picks(1, kSpreadBand);
  EXPECT_EQ(spread.order(), longest_first);
}

TEST(Pool, PickRespectsMaxParallel) {
  Pool pool({item("a", 30), item("b", 20), item("c", 10)}, {2, 0, 0});
  EXPECT_EQ(pool.parallel_limit(), 2);
  ASSERT_EQ(pool.pick(0), std::optional<std::size_t>(0));
  pool.start(0, 0);
  ASSERT_EQ(pool.pick(0), std::optional<std::size_t>(1));
  pool.start(1, 0);
  EXPECT_EQ(pool.running(), 2);
  EXPECT_EQ(pool.pick(0), std::nullopt);
  pool.finish(0, AttemptEnd::compiled, ended("exit code 0", 30), 30);
  EXPECT_EQ(pool.running(), 1);
  ASSERT_EQ(pool.pick(30), std::optional<std::size_t>(2));
  pool.start(2, 30);
  EXPECT_EQ(pool.pick(30), std::nullopt);
  EXPECT_EQ(pool.progress()[0].state, ItemState::compiled);
  EXPECT_EQ(pool.progress()[0].compile_seconds, 30);
  EXPECT_EQ(pool.progress()[1].state, ItemState::running);
}

TEST(Pool, MaxParallelIsAtLeastOne) {
  Pool pool({item("a", 1)}, {0, 0, 0});
  EXPECT_EQ(pool.parallel_limit(), 1);
  EXPECT_EQ(pool.pick(0), std::optional<std::size_t>(0));
}

TEST(Pool, MemoryAdmission) {
  // Budget 10 GB; peaks 6, 6 and 3 GB, in that order of cost.
  Pool pool({item("six-a", 30, 6 * GB), item("six-b", 20, 6 * GB), item("three", 10, 3 * GB)},
            {8, 10 * GB, 0});
  ASSERT_EQ(pool.pick(0), std::optional<std::size_t>(0));
  pool.start(0, 0);
  EXPECT_EQ(pool.memory_in_use(), 6 * GB);
  // The second 6 GB does not fit beside the first; the 3 GB one does.
  ASSERT_EQ(pool.pick(0), std::optional<std::size_t>(2));
  pool.start(2, 0);
  EXPECT_EQ(pool.memory_in_use(), 9 * GB);
  EXPECT_EQ(pool.pick(0), std::nullopt);
  pool.finish(2, AttemptEnd::compiled, ended("exit code 0"), 10);
  EXPECT_EQ(pool.memory_in_use(), 6 * GB);
  EXPECT_EQ(pool.pick(10), std::nullopt); // 6 + 6 > 10 still
  pool.finish(0, AttemptEnd::compiled, ended("exit code 0"), 30);
  EXPECT_EQ(pool.memory_in_use(), 0U);
  ASSERT_EQ(pool.pick(30), std::optional<std::size_t>(1));
}

TEST(Pool, TooBigItemStartsWhenNothingRuns) {
  Pool pool({item("huge", 30, 20 * GB), item("small", 10, 1 * GB)}, {4, 10 * GB, 0});
  ASSERT_EQ(pool.pick(0), std::optional<std::size_t>(0));
  pool.start(0, 0);
  EXPECT_EQ(pool.memory_in_use(), 20 * GB);
  EXPECT_EQ(pool.pick(0), std::nullopt); // nothing fits beside it
  pool.finish(0, AttemptEnd::compiled, ended("exit code 0"), 30);
  ASSERT_EQ(pool.pick(30), std::optional<std::size_t>(1));
}

TEST(Pool, UnknownPeakAlwaysFits) {
  Pool pool({item("a", 30, 9 * GB), item("unknown", 20, 0)}, {4, 10 * GB, 0});
  pool.start(0, 0);
  EXPECT_EQ(pool.pick(0), std::optional<std::size_t>(1));
}

TEST(Pool, FailedIsRetriedWithBackoffThenFails) {
  Pool pool({item("a", 10)}, {1, 0, 2});
  pool.start(0, 0);
  pool.finish(0, AttemptEnd::failed, ended("exit code 70", 4), 10);
  EXPECT_EQ(pool.progress()[0].state, ItemState::retry_wait);
  EXPECT_DOUBLE_EQ(pool.progress()[0].eligible_at, 10 + kRetryBackoffSeconds);
  EXPECT_EQ(pool.progress()[0].last_exit, "exit code 70");
  EXPECT_EQ(pool.pick(10.4), std::nullopt);
  EXPECT_EQ(pool.next_due(10.4), std::optional<double>(10.5));
  EXPECT_FALSE(pool.finished());
  ASSERT_EQ(pool.pick(10.5), std::optional<std::size_t>(0));
  pool.start(0, 10.5);
  EXPECT_EQ(pool.progress()[0].attempts, 2);
  EXPECT_EQ(pool.progress()[0].retries, 1);
  pool.finish(0, AttemptEnd::failed, ended("exit code 70", 4), 20);
  EXPECT_EQ(pool.progress()[0].state, ItemState::retry_wait);
  EXPECT_DOUBLE_EQ(pool.progress()[0].eligible_at, 20 + 2 * kRetryBackoffSeconds); // doubled
  ASSERT_EQ(pool.pick(21), std::optional<std::size_t>(0));
  pool.start(0, 21);
  pool.finish(0, AttemptEnd::failed, ended("exit code 71", 4), 30);
  EXPECT_EQ(pool.progress()[0].state, ItemState::failed);
  EXPECT_EQ(pool.progress()[0].attempts, 3);
  EXPECT_EQ(pool.progress()[0].retries, 2);
  EXPECT_EQ(pool.progress()[0].last_exit, "exit code 71");
  EXPECT_DOUBLE_EQ(pool.progress()[0].compile_seconds, 12);
  EXPECT_FALSE(pool.progress()[0].cached_failure);
  EXPECT_TRUE(pool.finished());
  EXPECT_EQ(pool.count(ItemState::failed), 1U);
  EXPECT_EQ(pool.pick(100), std::nullopt);
}

// A full disk stays full: the compile that hit it is not retried, nothing new
// starts, and what waited fails saying why; a compile already running ends
// as it ends (and is not retried either).
TEST(Pool, NoSpaceIsNotRetriedAndStopsNewStarts) {
  Pool pool({item("a", 40), item("b", 30), item("c", 20), item("d", 10)}, {2, 0, 3});
  ASSERT_EQ(pool.pick(0), std::optional<std::size_t>(0));
  pool.start(0, 0);
  ASSERT_EQ(pool.pick(0), std::optional<std::size_t>(1));
  pool.start(1, 0);
  pool.finish(1, AttemptEnd::failed, ended("exit code 70"), 5); // a retry waits
  ASSERT_EQ(pool.progress()[1].state, ItemState::retry_wait);
  const std::string full = "No space left on device: the filesystem of /cache is full (12 KB free)";
  pool.finish(0, AttemptEnd::no_space, ended(full, 8), 8);
  EXPECT_EQ(pool.progress()[0].state, ItemState::failed);
  EXPECT_EQ(pool.progress()[0].attempts, 1);
  EXPECT_EQ(pool.progress()[0].last_exit, full);
  EXPECT_FALSE(pool.progress()[0].cached_failure);
  for (std::size_t i : {1U, 2U, 3U}) EXPECT_EQ(pool.progress()[i].state, ItemState::failed) << i;
  EXPECT_EQ(pool.progress()[1].last_exit, "exit code 70; not retried: " + full);
  EXPECT_EQ(pool.progress()[2].last_exit, "not compiled: " + full);
  EXPECT_EQ(pool.progress()[3].last_exit, "not compiled: " + full);
  EXPECT_EQ(pool.progress()[2].attempts, 0);
  EXPECT_EQ(pool.pick(100), std::nullopt);
  EXPECT_TRUE(pool.finished());
  EXPECT_EQ(pool.count(ItemState::failed), 4U);
}

TEST(Pool, AfterNoSpaceARunningCompileThatFailsIsNotRetried) {
  Pool pool({item("a", 40), item("b", 30)}, {2, 0, 3});
  pool.start(0, 0);
  pool.start(1, 0);
  pool.finish(0, AttemptEnd::no_space, ended("No space left on device"), 1);
  EXPECT_FALSE(pool.finished());
  pool.finish(1, AttemptEnd::failed, ended("exit code 70"), 2);
  EXPECT_EQ(pool.progress()[1].state, ItemState::failed);
  EXPECT_EQ(pool.progress()[1].last_exit, "exit code 70; not retried: No space left on device");
  EXPECT_TRUE(pool.finished());
}

TEST(Pool, BackoffGrowsAndIsBounded) {
  Pool pool({item("a", 10)}, {1, 0, 10});
  double now = 0;
  std::vector<double> waits;
  for (int attempt = 1; attempt <= 8; ++attempt) {
    ASSERT_EQ(pool.pick(now), std::optional<std::size_t>(0)) << "attempt " << attempt;
    pool.start(0, now);
    pool.finish(0, AttemptEnd::failed, ended("exit code 1"), now);
    ASSERT_EQ(pool.progress()[0].state, ItemState::retry_wait);
    waits.push_back(pool.progress()[0].eligible_at - now);
    now = pool.progress()[0].eligible_at;
  }
  EXPECT_EQ(waits, (std::vector<double>{0.5, 1, 2, 4, 8, 8, 8, 8}));
  EXPECT_EQ(kMaxRetryBackoffSeconds, 8);
}

TEST(Pool, NoRetriesMeansFailedAtOnce) {
  Pool pool({item("a", 10)}, {1, 0, 0});
  pool.start(0, 0);
  pool.finish(0, AttemptEnd::failed, ended("exit code 1"), 1);
  EXPECT_EQ(pool.progress()[0].state, ItemState::failed);
  EXPECT_EQ(pool.progress()[0].retries, 0);
  EXPECT_TRUE(pool.finished());
}

TEST(Pool, KilledLowersParallelismAndIsRetriedUpToTheOomLimit) {
  Pool pool({item("a", 10, 2 * GB), item("b", 5)}, {4, 0, 0});
  for (int kill = 1; kill <= kMaxOomRetries; ++kill) {
    ASSERT_EQ(pool.pick(kill * 10), std::optional<std::size_t>(0)) << "kill " << kill;
    pool.start(0, kill * 10);
    pool.finish(0, AttemptEnd::killed, ended("killed by signal SIGKILL", 3, 7 * GB), kill * 10 + 1);
    EXPECT_EQ(pool.parallel_limit(), 4 - kill);
    EXPECT_EQ(pool.progress()[0].state, ItemState::retry_wait);
    EXPECT_EQ(pool.progress()[0].oom_kills, kill);
    EXPECT_DOUBLE_EQ(pool.progress()[0].eligible_at, kill * 10 + 1 + kRetryBackoffSeconds);
  }
  // What it reached before dying is now its predicted peak.
  EXPECT_EQ(pool.items()[0].predicted.peak_bytes, 7 * GB);
  EXPECT_EQ(pool.progress()[0].peak_rss_bytes, 7 * GB);
  // Killed once more with others running: a last attempt, alone.
  pool.start(1, 99); // "b" runs beside it
  pool.start(0, 100);
  pool.finish(0, AttemptEnd::killed, ended("killed by signal SIGKILL", 3, 7 * GB), 101);
  EXPECT_EQ(pool.progress()[0].state, ItemState::retry_wait);
  EXPECT_TRUE(pool.progress()[0].alone);
  EXPECT_EQ(pool.pick(200), std::nullopt) << "nothing starts while b runs: a waits to run alone";
  pool.finish(1, AttemptEnd::compiled, ended("exit code 0"), 201);
  ASSERT_EQ(pool.pick(202), std::optional<std::size_t>(0));
  pool.start(0, 202);
  EXPECT_TRUE(pool.progress()[0].ran_alone);
  EXPECT_EQ(pool.running(), 1);
  // Killed alone: it does not fit at all.
  pool.finish(0, AttemptEnd::killed, ended("killed by signal SIGKILL", 3, 7 * GB), 205);
  EXPECT_EQ(pool.progress()[0].state, ItemState::failed);
  EXPECT_EQ(pool.progress()[0].attempts, kMaxOomRetries + 2);
  EXPECT_EQ(pool.progress()[0].retries, kMaxOomRetries + 1);
  EXPECT_EQ(pool.progress()[0].oom_kills, kMaxOomRetries + 2);
  EXPECT_EQ(pool.parallel_limit(), 1);
  EXPECT_TRUE(pool.finished());
}

TEST(Pool, LastOomAttemptAloneCanSucceed) {
  Pool pool({item("big", 10, 2 * GB), item("s1", 5), item("s2", 4), item("s3", 3)}, {3, 0, 0});
  for (int kill = 1; kill <= kMaxOomRetries + 1; ++kill) {
    ASSERT_EQ(pool.pick(kill * 10), std::optional<std::size_t>(0));
    pool.start(0, kill * 10);
    pool.finish(0, AttemptEnd::killed, ended("killed by signal SIGKILL"), kill * 10 + 1);
  }
  ASSERT_TRUE(pool.progress()[0].alone);
  // Nothing runs, so it starts at once, ahead of the small ones; they wait.
  ASSERT_EQ(pool.pick(50), std::optional<std::size_t>(0));
  pool.start(0, 50);
  EXPECT_EQ(pool.pick(50), std::nullopt) << "it runs alone";
  pool.finish(0, AttemptEnd::compiled, ended("exit code 0"), 60);
  EXPECT_EQ(pool.progress()[0].state, ItemState::compiled);
  // Then the rest go as before.
  EXPECT_EQ(pool.pick(60), std::optional<std::size_t>(1));
}

TEST(Pool, KilledNeverLowersParallelismBelowOne) {
  Pool pool({item("a", 10)}, {1, 0, 0});
  pool.start(0, 0);
  pool.finish(0, AttemptEnd::killed, ended("killed by signal SIGKILL"), 1);
  EXPECT_EQ(pool.parallel_limit(), 1);
  EXPECT_EQ(pool.progress()[0].state, ItemState::retry_wait);
}

TEST(Pool, LockedElsewhereIsDeferredAndRevisited) {
  Pool pool({item("a", 10), item("b", 10), item("c", 10), item("d", 10)}, {4, 0, 0});
  for (std::size_t i = 0; i < 4; ++i) {
    pool.start(i, 5);
    pool.finish(i, AttemptEnd::locked_elsewhere, ended(""), 5);
    EXPECT_EQ(pool.progress()[i].state, ItemState::deferred);
    EXPECT_EQ(pool.progress()[i].attempts, 0); // not an attempt of ours
    EXPECT_DOUBLE_EQ(pool.progress()[i].eligible_at, 5 + kRevisitSeconds);
  }
  EXPECT_EQ(pool.running(), 0);
  EXPECT_EQ(pool.pick(5), std::nullopt);
  const double first_look = 5 + kRevisitSeconds;
  EXPECT_TRUE(pool.due_revisits(first_look - 0.01).empty());
  EXPECT_EQ(pool.due_revisits(first_look), (std::vector<std::size_t>{0, 1, 2, 3}));
  EXPECT_EQ(pool.next_due(5), std::optional<double>(first_look));

  pool.revisit(0, Pool::Found::pending, first_look); // its holder is gone
  EXPECT_EQ(pool.progress()[0].state, ItemState::queued);
  pool.revisit(1, Pool::Found::done, first_look);
  EXPECT_EQ(pool.progress()[1].state, ItemState::compiled_elsewhere);
  pool.revisit(2, Pool::Found::failed, first_look, "/logs/c.log");
  EXPECT_EQ(pool.progress()[2].state, ItemState::failed);
  EXPECT_TRUE(pool.progress()[2].cached_failure);
  EXPECT_EQ(pool.progress()[2].log_path, fs::path("/logs/c.log"));
  pool.revisit(3, Pool::Found::locked, first_look);
  EXPECT_EQ(pool.progress()[3].state, ItemState::deferred);
  EXPECT_DOUBLE_EQ(pool.progress()[3].eligible_at, first_look + kHeldElsewhereMinPollSeconds);
  // Locked on and on: each look a tenth of the hold so far after the last.
  pool.revisit(3, Pool::Found::locked, 5 + 60);
  EXPECT_DOUBLE_EQ(pool.progress()[3].eligible_at, 5 + 60 + 6);

  EXPECT_EQ(pool.pick(6), std::optional<std::size_t>(0));
  EXPECT_FALSE(pool.finished());
}

// A lock whose lease's end a look read: looked at again just after it when
// that is sooner than the backoff (a holder that died is found gone then),
// never when the backoff comes first (a holder alive renews well before),
// and never sooner than the floor of any look.
TEST(Pool, AHeldGraphIsLookedAtAgainWhenItsLeaseEnds) {
  Pool pool({item("a", 10), item("b", 10)}, {2, 0, 0});
  for (std::size_t i = 0; i < 2; ++i) {
    pool.start(i, 0);
    pool.finish(i, AttemptEnd::locked_elsewhere, ended(""), 0);
  }
  // Held for 200 s: the backoff is at its ceiling, 10 s.
  pool.revisit(0, Pool::Found::held_elsewhere, 1);
  pool.revisit(0, Pool::Found::held_elsewhere, 201);
  ASSERT_DOUBLE_EQ(pool.progress()[0].eligible_at, 201 + kHeldElsewhereMaxPollSeconds);
  pool.look_again_when_lease_ends(0, 203, 201);
  EXPECT_DOUBLE_EQ(pool.progress()[0].eligible_at, 203 + kLookPastLeaseEndSeconds);
  // (b, deferred at 0 and not looked at since, is due all along.)
  EXPECT_EQ(pool.due_revisits(203), std::vector<std::size_t>{1});
  EXPECT_EQ(pool.due_revisits(203 + kLookPastLeaseEndSeconds), (std::vector<std::size_t>{1, 0}));
  // A lease that ends after the backoff's look changes nothing.
  pool.revisit(0, Pool::Found::held_elsewhere, 204);
  const double backoff = pool.progress()[0].eligible_at;
  pool.look_again_when_lease_ends(0, 204 + 45, 204);
  EXPECT_DOUBLE_EQ(pool.progress()[0].eligible_at, backoff);
  // A lease already over by this clock (another clock judged it held): the
  // floor, not a look every tick.
  pool.look_again_when_lease_ends(0, 150, 204);
  EXPECT_DOUBLE_EQ(pool.progress()[0].eligible_at, 204 + kOutOfWorkMinPollSeconds);
  // A graph of this host's own processes' locks, the same.
  pool.revisit(1, Pool::Found::locked, 1);
  pool.look_again_when_lease_ends(1, 1.3, 1);
  EXPECT_DOUBLE_EQ(pool.progress()[1].eligible_at, 1.3 + kLookPastLeaseEndSeconds);
  // Nothing changes for a graph no longer deferred.
  pool.revisit(1, Pool::Found::done, 2);
  pool.look_again_when_lease_ends(1, 2.5, 2);
  EXPECT_EQ(pool.progress()[1].state, ItemState::compiled_elsewhere);
}

// A graph another node holds (a remote cache's lock): looked at again
// after a tenth of how long it has been seen held, at least 0.2 s (the
// launcher has nothing else to do) and at most 10 s later; anything else the
// look finds ends the backoff.
TEST(Pool, LockedRemotelyBacksOffToTheCeiling) {
  Pool pool({item("a", 10)}, {1, 0, 0});
  pool.start(0, 0);
  pool.finish(0, AttemptEnd::locked_elsewhere, ended(""), 0);
  EXPECT_FALSE(pool.progress()[0].held_elsewhere); // not looked at yet
  double now = kRevisitSeconds;
  std::vector<double> periods;
  while (periods.empty() || periods.back() < kHeldElsewhereMaxPollSeconds) {
    ASSERT_LT(periods.size(), 100u) << "the looks never reached the ceiling";
    ASSERT_EQ(pool.due_revisits(now), std::vector<std::size_t>{0});
    pool.revisit(0, Pool::Found::held_elsewhere, now);
    EXPECT_EQ(pool.progress()[0].state, ItemState::deferred);
    EXPECT_TRUE(pool.progress()[0].held_elsewhere);
    EXPECT_DOUBLE_EQ(pool.progress()[0].held_elsewhere_since, kRevisitSeconds); // the first look that found it
    double period = pool.progress()[0].eligible_at - now;
    EXPECT_NEAR(period, std::clamp((now - kRevisitSeconds) / 10, kOutOfWorkMinPollSeconds, 10.0), 1e-9)
        << "look " << periods.size();
    periods.push_back(period);
    EXPECT_TRUE(pool.due_revisits(pool.progress()[0].eligible_at - 0.01).empty());
    now = pool.progress()[0].eligible_at;
  }
  EXPECT_DOUBLE_EQ(periods.front(), kOutOfWorkMinPollSeconds);
  EXPECT_GE(now - kRevisitSeconds, 100) << "the ceiling comes once it has been held 100 s";
  EXPECT_TRUE(pool.only_deferred_left());
  EXPECT_EQ(pool.pick(now), std::nullopt);

  pool.revisit(0, Pool::Found::pending, now); // the lock expired: ours to compile
  EXPECT_FALSE(pool.progress()[0].held_elsewhere);
  EXPECT_EQ(pool.progress()[0].held_looks, 0);
  EXPECT_EQ(pool.pick(now), std::optional<std::size_t>(0));
  pool.start(0, now);
  pool.finish(0, AttemptEnd::locked_elsewhere, ended(""), now); // taken again meanwhile
  pool.revisit(0, Pool::Found::held_elsewhere, now + 1);
  EXPECT_DOUBLE_EQ(pool.progress()[0].eligible_at, now + 1 + kOutOfWorkMinPollSeconds);
  pool.revisit(0, Pool::Found::done, now + 3);
  EXPECT_EQ(pool.progress()[0].state, ItemState::compiled_elsewhere);
  EXPECT_TRUE(pool.finished());
}

// A graph found held by another node as it was taken (shared_graphs.hpp):
// never picked for a worker; looked at 0.5 s later, then on the same backoff
// as one a worker found held (the taking's look was the first; 0.2 s apart
// at first, since nothing else is left to do); the lock's
// expiry makes it ours, its result settles it, with no attempt either way.
TEST(Pool, HeldRemotelyAtTheStartIsWaitedForWithoutAWorker) {
  Pool pool({item("a", 10), item("b", 10)}, {2, 0, 0});
  pool.mark_held_elsewhere(0, 5);
  pool.mark_held_elsewhere(1, 5);
  EXPECT_EQ(pool.progress()[0].state, ItemState::deferred);
  EXPECT_TRUE(pool.progress()[0].held_elsewhere);
  EXPECT_DOUBLE_EQ(pool.progress()[0].held_elsewhere_since, 5);
  EXPECT_EQ(pool.pick(5), std::nullopt);
  EXPECT_TRUE(pool.only_deferred_left());
  EXPECT_EQ(pool.next_due(5), std::optional<double>(5 + kHeldElsewhereMinPollSeconds));
  EXPECT_TRUE(pool.due_revisits(5 + kHeldElsewhereMinPollSeconds - 0.01).empty());
  double now = 5 + kHeldElsewhereMinPollSeconds;
  std::vector<double> periods;
  for (int look = 0; look < 3; ++look) {
    ASSERT_EQ(pool.due_revisits(now), (std::vector<std::size_t>{0, 1}));
    pool.revisit(0, Pool::Found::held_elsewhere, now);
    pool.revisit(1, Pool::Found::held_elsewhere, now);
    EXPECT_DOUBLE_EQ(pool.progress()[0].held_elsewhere_since, 5);
    periods.push_back(pool.progress()[0].eligible_at - now);
    now = pool.progress()[0].eligible_at;
  }
  ASSERT_EQ(periods.size(), 3u);
  for (double period : periods) EXPECT_NEAR(period, kOutOfWorkMinPollSeconds, 1e-9) << "held under 2 s: the floor";
  pool.revisit(0, Pool::Found::done, now); // its result landed
  EXPECT_EQ(pool.progress()[0].state, ItemState::compiled_elsewhere);
  EXPECT_EQ(pool.progress()[0].attempts, 0);
  pool.revisit(1, Pool::Found::pending, now); // the lock expired
  EXPECT_EQ(pool.pick(now), std::optional<std::size_t>(1));
  pool.start(1, now);
  pool.finish(1, AttemptEnd::compiled, ended("exit code 0"), now + 1);
  EXPECT_EQ(pool.progress()[1].state, ItemState::compiled);
  EXPECT_EQ(pool.progress()[1].attempts, 1);
  EXPECT_TRUE(pool.finished());
}

// Split among a roll of launchers, each item is this launcher's as
// share_owner has it, and the order puts its own first (costliest first
// within each share). Alone on the roll, everything is its own. Either way
// the shares are split from then on.
TEST(Pool, SharedAmongARollItsOwnComeFirst) {
  std::vector<WorkItem> items;
  for (int i = 0; i < 8; ++i) items.push_back(item("k" + std::to_string(i), 80.0 - i));
  Pool pool(std::move(items), {1, 0, 0});
  EXPECT_FALSE(pool.shares_split());
  const std::vector<std::string> roll = {"a.1.x", "b.2.y"};
  pool.share_among(roll, "b.2.y");
  EXPECT_TRUE(pool.shares_split());
  std::vector<std::size_t> own, others;
  for (std::size_t i = 0; i < 8; ++i) {
    const bool mine = roll[cluster::share_owner(pool.items()[i].key, roll)] == "b.2.y";
    EXPECT_EQ(pool.items()[i].own_share, mine) << i;
    (mine ? own : others).push_back(i);
  }
  ASSERT_FALSE(own.empty());
  ASSERT_FALSE(others.empty());
  std::vector<std::size_t> expected = own;
  expected.insert(expected.end(), others.begin(), others.end());
  EXPECT_EQ(pool.order(), expected);
  EXPECT_EQ(pool.pick(0), own.front());
  pool.share_among({"b.2.y"}, "b.2.y");
  for (std::size_t i = 0; i < 8; ++i) EXPECT_TRUE(pool.items()[i].own_share) << i;
  EXPECT_EQ(pool.order(), (std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

// The graphs costlier than the work left per slot of the cluster (at most
// a launcher's slots' worth, costliest first) are every launcher's own,
// whoever owns them by the hash: the first launcher free starts them.
// Graphs already done do not count in the work left.
TEST(Pool, TheGraphsThatWouldEndTheRunLateAreEveryLaunchersOwn) {
  std::vector<WorkItem> items = {item("big1", 30), item("big2", 28), item("big3", 27), item("mid", 9)};
  for (int i = 0; i < 20; ++i) items.push_back(item("small" + std::to_string(i), 3));
  items.push_back(item("done", 100));
  Pool pool(std::move(items), {2, 0, 0});
  pool.mark_cached(24); // done: 100 s that are not left
  const std::vector<std::string> roll = {"a.1.x", "b.2.y", "c.3.z", "d.4.w"};
  // A launcher that owns none of the three big ones by the hash.
  std::string self;
  for (const auto& member : roll)
    if (roll[cluster::share_owner("big1", roll)] != member && roll[cluster::share_owner("big2", roll)] != member &&
        roll[cluster::share_owner("big3", roll)] != member)
      self = member;
  ASSERT_FALSE(self.empty()) << "every launcher owns one of the big graphs";
  pool.share_among(roll, self);
  // Left: 30 + 28 + 27 + 9 + 20 × 3 = 154 s over 4 × 2 slots, 19.25 s a
  // slot. Three are costlier; two are a launcher's slots' worth.
  EXPECT_TRUE(pool.items()[0].own_share);
  EXPECT_TRUE(pool.items()[1].own_share);
  EXPECT_FALSE(pool.items()[2].own_share) << "beyond this launcher's slots";
  EXPECT_EQ(pool.items()[3].own_share, roll[cluster::share_owner("mid", roll)] == self) << "cheaper than a slot's share";
  ASSERT_GE(pool.order().size(), 2u);
  EXPECT_EQ(pool.order()[0], 0u);
  EXPECT_EQ(pool.order()[1], 1u);
  EXPECT_EQ(pool.pick(0), std::optional<std::size_t>(0));
  EXPECT_TRUE(pool.items()[0].everyones);
  EXPECT_TRUE(pool.items()[1].everyones);

  // Its part of the two is one (2 over 4 launchers, at least one): with
  // big1 running, big2 is another's to pick, after its own share (by the
  // hash) and before the others' cheaper graphs.
  pool.start(0, 0);
  // big3, another's, is costlier than the work left to start per slot of
  // the cluster (28 + 27 + 9 + 60 = 124 s over 8 slots) and more than
  // kHelpFirstRatio times its own costliest: it comes first.
  EXPECT_EQ(pool.pick(0), std::optional<std::size_t>(2));
  pool.start(2, 0);
  pool.finish(2, AttemptEnd::compiled, ended("exit code 0", 27), 0);
  std::vector<std::size_t> own_by_hash, others_by_hash;
  for (std::size_t i = 3; i < 24; ++i)
    (roll[cluster::share_owner(pool.items()[i].key, roll)] == self ? own_by_hash : others_by_hash).push_back(i);
  ASSERT_FALSE(own_by_hash.empty());
  ASSERT_FALSE(others_by_hash.empty());
  for (std::size_t n = 0; n < own_by_hash.size(); ++n) {
    auto next = pool.pick(0);
    ASSERT_TRUE(next.has_value());
    EXPECT_TRUE(std::find(own_by_hash.begin(), own_by_hash.end(), *next) != own_by_hash.end()) << *next;
    pool.start(*next, 0);
    pool.finish(*next, AttemptEnd::compiled, ended("exit code 0"), 0);
  }
  EXPECT_EQ(pool.pick(0), std::optional<std::size_t>(1));
  // Once big1 ends, big2 is its own again.
  pool.finish(0, AttemptEnd::compiled, ended("exit code 0", 30), 30);
  EXPECT_EQ(pool.pick(30), std::optional<std::size_t>(1));

  // Split by --world_size: the same from the shares make_items gave.
  Pool world({item("big1", 30, 0, false), item("big2", 28, 0, false), item("mid", 9, 0, false),
              item("small", 3, 0, true)},
             {2, 0, 0});
  world.share_the_critical(4); // 70 s over 8 slots: 8.75 s a slot
  EXPECT_TRUE(world.items()[0].own_share);
  EXPECT_TRUE(world.items()[1].own_share);
  EXPECT_FALSE(world.items()[2].own_share) << "beyond this launcher's slots";
  EXPECT_EQ(world.order(), (std::vector<std::size_t>{0, 1, 3, 2}));
  // Alone, nothing is shared: the shares stay as they are.
  Pool alone({item("big1", 30, 0, false), item("small", 3, 0, true)}, {2, 0, 0});
  alone.share_the_critical(1);
  EXPECT_FALSE(alone.items()[0].own_share);
}

// Once the shares are split, another launcher's graph costlier than the
// work left to start per slot of the cluster, and kHelpFirstRatio times
// costlier than this launcher's costliest own graph ready, is picked
// first: its owner may be busy with costlier ones. Not before: early in a
// run the others' graphs wait for their owners.
TEST(Pool, AnotherLaunchersGraphThatWouldEndTheRunLateComesBeforeSmallOwnOnes) {
  Pool pool({item("own1", 10, 0, true), item("own2", 10, 0, true), item("own3", 2, 0, true),
             item("other1", 6, 0, false), item("other2", 10, 0, false), item("other3", 10, 0, false)},
            {1, 0, 0});
  pool.split_by_world();
  pool.share_the_critical(2); // 48 s over 2 slots: none costlier than 24 s
  for (std::size_t i = 0; i < 6; ++i) EXPECT_FALSE(pool.items()[i].everyones) << i;
  // 48 s left over 2 slots: 24 s a slot; the others' wait.
  EXPECT_EQ(pool.pick(0), std::optional<std::size_t>(0));
  pool.start(0, 0);
  pool.finish(0, AttemptEnd::compiled, ended("exit code 0", 10), 10);
  pool.revisit(4, Pool::Found::done, 10); // the other launcher compiled them
  pool.revisit(5, Pool::Found::done, 10);
  // 10 + 2 + 6 = 18 s left, 9 s a slot: other1 (6 s) waits.
  EXPECT_EQ(pool.pick(10), std::optional<std::size_t>(1));
  pool.start(1, 10);
  pool.finish(1, AttemptEnd::compiled, ended("exit code 0", 10), 20);
  // 2 + 6 = 8 s left, 4 s a slot: other1 is costlier, and 3 times own3.
  EXPECT_EQ(pool.pick(20), std::optional<std::size_t>(3));
  pool.start(3, 20);
  pool.finish(3, AttemptEnd::compiled, ended("exit code 0", 6), 26);
  EXPECT_EQ(pool.pick(26), std::optional<std::size_t>(2));
}

// A graph another host holds is not looked at while this pool has work
// ready to start (its look costs requests and changes nothing), nor does
// it set the wait's timeout then; once no work waits, it is due as before.
// A graph locked in this cache is looked at in any case.
TEST(Pool, HeldElsewhereWaitsWhileWorkIsReady) {
  Pool pool({item("a", 30), item("b", 20), item("c", 10), item("d", 5)}, {1, 0, 0});
  pool.mark_held_elsewhere(0, 0);
  pool.start(1, 0);
  pool.finish(1, AttemptEnd::locked_elsewhere, ended(""), 0); // due at kRevisitSeconds
  ASSERT_EQ(pool.pick(0), std::optional<std::size_t>(2));
  pool.start(2, 0);
  // d waits (one slot): a, due at 0.5, is not.
  EXPECT_EQ(pool.due_revisits(1), (std::vector<std::size_t>{1}));
  pool.revisit(1, Pool::Found::locked, 1);
  EXPECT_EQ(pool.next_due(1), pool.progress()[1].eligible_at);
  pool.finish(2, AttemptEnd::compiled, ended("exit code 0"), 2);
  ASSERT_EQ(pool.pick(2), std::optional<std::size_t>(3));
  pool.start(3, 2);
  // Nothing waits ready now: a is due (since 0.5), before b (since 1.5).
  EXPECT_EQ(pool.next_due(2), std::optional<double>(kHeldElsewhereMinPollSeconds));
  EXPECT_EQ(pool.due_revisits(2), (std::vector<std::size_t>{0, 1}));
}

// A launcher that runs out of work (its last compile ended, nothing ready)
// while graphs are held elsewhere looks at them again from the floor, and
// backs off from then, not from when they were first seen held: it ends at
// most about a tenth of its wait after their holders, not a tenth of the
// holds.
TEST(Pool, OutOfWorkTheLooksAtHeldGraphsStartAgainFromTheFloor) {
  Pool pool({item("a", 10), item("b", 5)}, {1, 0, 0});
  pool.mark_held_elsewhere(0, 0);
  pool.revisit(0, Pool::Found::held_elsewhere, 60); // work waits: the hold's backoff
  EXPECT_DOUBLE_EQ(pool.progress()[0].eligible_at, 60 + 6);
  ASSERT_EQ(pool.pick(60), std::optional<std::size_t>(1));
  pool.start(1, 60);
  pool.finish(1, AttemptEnd::compiled, ended("exit code 0"), 62);
  EXPECT_DOUBLE_EQ(pool.progress()[0].eligible_at, 62 + kOutOfWorkMinPollSeconds);
  EXPECT_EQ(pool.due_revisits(62.5), std::vector<std::size_t>{0});
  pool.revisit(0, Pool::Found::held_elsewhere, 62.5);
  EXPECT_DOUBLE_EQ(pool.progress()[0].eligible_at, 62.5 + kOutOfWorkMinPollSeconds);
  pool.revisit(0, Pool::Found::held_elsewhere, 82);
  EXPECT_DOUBLE_EQ(pool.progress()[0].eligible_at, 82 + 2) << "a tenth of the 20 s out of work";
}

// A start whose compile waits for its shared lock holds a slot from the
// start; withdrawn, the item is as before it (no attempt counted, its slot
// free) and is marked for what was found; begun, its time counts from then.
TEST(Pool, AStartWithdrawnLeavesNoTrace) {
  Pool pool({item("a", 10), item("b", 5)}, {1, 0, 0});
  pool.start(0, 0);
  EXPECT_EQ(pool.running(), 1);
  EXPECT_EQ(pool.pick(0), std::nullopt);
  pool.withdraw(0, 0.1);
  EXPECT_EQ(pool.running(), 0);
  EXPECT_EQ(pool.progress()[0].attempts, 0);
  EXPECT_EQ(pool.progress()[0].state, ItemState::queued);
  pool.mark_held_elsewhere(0, 0.2);
  ASSERT_EQ(pool.pick(0.2), std::optional<std::size_t>(1));
  pool.start(1, 0.2);
  pool.begin(1, 0.5);
  EXPECT_DOUBLE_EQ(pool.progress()[1].started_at, 0.5);
  pool.finish(1, AttemptEnd::compiled, ended("exit code 0"), 5.5);
  EXPECT_EQ(pool.progress()[1].attempts, 1);
  EXPECT_EQ(pool.progress()[1].state, ItemState::compiled);
}

// A runner that looks at only some due items per tick reaches the longest
// due first, whatever their order.
TEST(Pool, DueRevisitsComeLongestDueFirst) {
  Pool pool({item("a", 10), item("b", 10), item("c", 10)}, {3, 0, 0});
  pool.mark_locked_elsewhere(0, 5);
  pool.mark_locked_elsewhere(1, 3);
  pool.mark_locked_elsewhere(2, 4);
  EXPECT_EQ(pool.due_revisits(10), (std::vector<std::size_t>{1, 2, 0}));
}

TEST(Pool, MarkLockedElsewhereAtTheStart) {
  Pool pool({item("a", 10)}, {1, 0, 0});
  pool.mark_locked_elsewhere(0, 2);
  EXPECT_EQ(pool.progress()[0].state, ItemState::deferred);
  EXPECT_EQ(pool.pick(2), std::nullopt);
  EXPECT_EQ(pool.due_revisits(2 + kRevisitSeconds), std::vector<std::size_t>{0});
}

TEST(Pool, AlreadyDoneDoesNotCountAnAttempt) {
  Pool pool({item("a", 10)}, {2, 0, 1});
  pool.start(0, 0);
  pool.finish(0, AttemptEnd::failed, ended("exit code 1"), 1);
  ASSERT_EQ(pool.pick(5), std::optional<std::size_t>(0));
  pool.start(0, 5);
  EXPECT_EQ(pool.progress()[0].attempts, 2);
  EXPECT_EQ(pool.progress()[0].retries, 1);
  pool.finish(0, AttemptEnd::already_done, ended(""), 6);
  EXPECT_EQ(pool.progress()[0].state, ItemState::compiled_elsewhere);
  EXPECT_EQ(pool.progress()[0].attempts, 1);
  EXPECT_EQ(pool.progress()[0].retries, 0);
  EXPECT_EQ(pool.running(), 0);
  EXPECT_TRUE(pool.finished());
}

// An entry removed by another process (neuron_cache rm, --command clean)
// before or while its worker ran: removed_elsewhere, no attempt counted, not
// failed, and the pool goes on.
TEST(Pool, RemovedEntryIsNeitherAnAttemptNorAFailure) {
  Pool pool({item("a", 10), item("b", 10), item("c", 10)}, {2, 0, 3});
  pool.mark_removed_elsewhere(2); // gone since the trial
  pool.start(0, 0);
  pool.finish(0, AttemptEnd::removed, ended("neuron_cc_wrapper exit code 2"), 1);
  EXPECT_EQ(pool.progress()[0].state, ItemState::removed_elsewhere);
  EXPECT_EQ(pool.progress()[0].attempts, 0);
  EXPECT_EQ(pool.progress()[0].last_exit, "removed by another process");
  EXPECT_EQ(pool.progress()[2].state, ItemState::removed_elsewhere);
  EXPECT_EQ(pool.running(), 0);
  // A deferred one found gone at its revisit.
  pool.mark_locked_elsewhere(1, 0);
  pool.revisit(1, Pool::Found::removed, 2);
  EXPECT_EQ(pool.progress()[1].state, ItemState::removed_elsewhere);
  EXPECT_EQ(pool.count(ItemState::removed_elsewhere), 3U);
  EXPECT_EQ(pool.count(ItemState::failed), 0U);
  EXPECT_TRUE(pool.finished());
}

TEST(Pool, CachedStatesAtTheStart) {
  Pool pool({item("a", 10), item("b", 10), item("c", 10)}, {2, 0, 0});
  pool.mark_cached(0);
  pool.mark_cached_failure(1, "/cache/b/model.log");
  EXPECT_EQ(pool.progress()[0].state, ItemState::cached);
  EXPECT_EQ(pool.progress()[1].state, ItemState::failed);
  EXPECT_TRUE(pool.progress()[1].cached_failure);
  EXPECT_EQ(pool.progress()[1].log_path, fs::path("/cache/b/model.log"));
  EXPECT_EQ(pool.progress()[1].attempts, 0);
  EXPECT_EQ(pool.count(ItemState::cached), 1U);
  EXPECT_EQ(pool.count(ItemState::queued), 1U);
  EXPECT_EQ(pool.pick(0), std::optional<std::size_t>(2)); // only c is left to compile
  pool.start(2, 0);
  pool.finish(2, AttemptEnd::cached_failure, ended(""), 1);
  EXPECT_EQ(pool.progress()[2].state, ItemState::failed);
  EXPECT_TRUE(pool.progress()[2].cached_failure);
  EXPECT_TRUE(pool.finished());
}

TEST(Pool, FinishedAndNextDue) {
  Pool empty({}, {1, 0, 0});
  EXPECT_TRUE(empty.finished());
  EXPECT_EQ(empty.next_due(0), std::nullopt);
  EXPECT_EQ(empty.pick(0), std::nullopt);

  Pool pool({item("a", 10), item("b", 10), item("c", 10)}, {3, 0, 5});
  EXPECT_FALSE(pool.finished());
  EXPECT_EQ(pool.next_due(0), std::nullopt); // nothing waits on time
  pool.start(0, 0);
  pool.start(1, 0);
  pool.start(2, 0);
  pool.finish(0, AttemptEnd::locked_elsewhere, ended(""), 5);  // due at 6
  pool.finish(1, AttemptEnd::failed, ended("exit code 1"), 5); // due at 5.5
  EXPECT_EQ(pool.next_due(5), std::optional<double>(5.5));
  pool.finish(2, AttemptEnd::compiled, ended("exit code 0"), 5);
  EXPECT_FALSE(pool.finished());
  pool.revisit(0, Pool::Found::done, 6);
  EXPECT_EQ(pool.next_due(6), std::optional<double>(5.5));
  pool.start(1, 6);
  EXPECT_EQ(pool.next_due(6), std::nullopt);
  pool.finish(1, AttemptEnd::compiled, ended("exit code 0"), 7);
  EXPECT_TRUE(pool.finished());
  EXPECT_EQ(pool.count(ItemState::compiled), 2U);
  EXPECT_EQ(pool.count(ItemState::compiled_elsewhere), 1U);
}

WorkItem known(const std::string& key, double seconds) {
  WorkItem w = item(key, seconds);
  w.predicted.from_history = true;
  return w;
}

TEST(Pool, RemainingWork) {
  Pool pool({known("a", 10), known("b", 20), known("c", 30)}, {1, 0, 1});
  EXPECT_DOUBLE_EQ(*pool.remaining_work(0), 60);
  ASSERT_EQ(pool.pick(0), std::optional<std::size_t>(2));
  pool.start(2, 0);
  EXPECT_DOUBLE_EQ(*pool.remaining_work(5), 10 + 20 + 25);
  EXPECT_DOUBLE_EQ(*pool.remaining_work(40), 30); // overdue counts as nothing left
  pool.finish(2, AttemptEnd::compiled, ended("exit code 0", 40), 40);
  EXPECT_DOUBLE_EQ(*pool.remaining_work(40), 30);
  pool.start(1, 40);
  pool.finish(1, AttemptEnd::failed, ended("exit code 1"), 41); // waits for a retry: still to do
  EXPECT_DOUBLE_EQ(*pool.remaining_work(41), 30);
  pool.start(0, 41);
  pool.finish(0, AttemptEnd::locked_elsewhere, ended(""), 41); // deferred: still to do
  EXPECT_DOUBLE_EQ(*pool.remaining_work(41), 30);
  pool.revisit(0, Pool::Found::done, 42);
  EXPECT_DOUBLE_EQ(*pool.remaining_work(42), 20);
}

// With no history, the sizes alone say nothing of seconds: unknown until
// this run has measured a compile, then its seconds per byte.
TEST(Pool, RemainingWorkOfGraphsWithNoHistoryIsUnknownUntilOneIsMeasured) {
  std::vector<WorkItem> items = {item("a", 0.001), item("b", 0.001), item("c", 0.001)};
  items[1].graph_bytes = 3000;
  Pool pool(std::move(items), {1, 0, 0});
  EXPECT_EQ(pool.remaining_work(0), std::nullopt);
  auto first = pool.pick(0);
  ASSERT_TRUE(first);
  pool.start(*first, 0);
  EXPECT_EQ(pool.remaining_work(1), std::nullopt);
  pool.finish(*first, AttemptEnd::compiled, ended("exit code 0", 4), 4);
  // 4 s for the first graph's bytes: 4 ms a byte for the two left.
  double per_byte = 4.0 / static_cast<double>(pool.items()[*first].graph_bytes);
  double left = 0;
  for (std::size_t i = 0; i < 3; ++i)
    if (i != *first) left += per_byte * static_cast<double>(pool.items()[i].graph_bytes);
  ASSERT_TRUE(pool.remaining_work(4));
  EXPECT_DOUBLE_EQ(*pool.remaining_work(4), left);
}

// Runs a pool to its end as the runner would, each compile taking
// `took[i]` seconds: returns when the last ended.
double run_pool_to_end(Pool& pool, const std::vector<double>& took) {
  std::vector<std::pair<double, std::size_t>> running; // (ends at, item)
  double now = 0;
  while (!pool.finished()) {
    while (auto next = pool.pick(now)) {
      pool.start(*next, now);
      running.emplace_back(now + took[*next], *next);
    }
    auto first = std::min_element(running.begin(), running.end());
    now = first->first;
    pool.finish(first->second, AttemptEnd::compiled, ended("exit code 0", took[first->second]), now);
    running.erase(first);
  }
  return now;
}

std::vector<double> costs_in_order(const Pool& pool) {
  std::vector<double> out;
  for (std::size_t i : pool.order()) out.push_back(pool.items()[i].predicted.seconds);
  return out;
}

TEST(Pool, CostsFromHistoryArePlannedFromTheStart) {
  // Longest first on 2 slots: 3|3, then 2|2, then 2: ends at 7. The plan
  // puts 3+3 on one slot and 2+2+2 on the other: ends at 6.
  std::vector<WorkItem> items = {item("a", 3), item("b", 3), item("c", 2), item("d", 2), item("e", 2)};
  for (auto& w : items) w.predicted.from_history = true;
  Pool pool(items, {2, 0, 0});
  EXPECT_EQ(costs_in_order(pool), (std::vector<double>{3, 2, 2, 3, 2}));
  EXPECT_EQ(run_pool_to_end(pool, {3, 3, 2, 2, 2}), 6);

  Pool guessed({item("a", 3), item("b", 3), item("c", 2), item("d", 2), item("e", 2)}, {2, 0, 0});
  EXPECT_EQ(costs_in_order(guessed), (std::vector<double>{3, 3, 2, 2, 2})); // no history: longest first
  EXPECT_EQ(run_pool_to_end(guessed, {3, 3, 2, 2, 2}), 7);
}

TEST(Pool, ThePlanLeavesOutWhatIsAlreadyCached) {
  // Marked after construction, as the runner marks what it found done: the
  // 100 s graph is not compiled, so it takes no slot in the plan.
  std::vector<WorkItem> items = {item("a", 3), item("b", 3), item("c", 2), item("d", 2), item("e", 2),
                                 item("f", 100)};
  for (auto& w : items) w.predicted.from_history = true;
  Pool pool(items, {2, 0, 0});
  pool.mark_cached(5);
  EXPECT_EQ(costs_in_order(pool), (std::vector<double>{100, 3, 2, 2, 3, 2}));
  EXPECT_EQ(pool.pick(0), std::optional<std::size_t>(0));
}

TEST(Pool, BeyondThePlansLimitItIsLongestFirst) {
  // More waiting than lane_plan searches: longest first, as it would be.
  std::vector<WorkItem> items;
  for (std::size_t i = 0; i <= kMaxPlannedCompiles; ++i) {
    items.push_back(item("g" + std::to_string(1000 + i), static_cast<double>((i * 7919) % 1000 + 1)));
    items.back().predicted.from_history = true;
  }
  Pool pool(items, {3, 0, 0});
  std::vector<double> costs = costs_in_order(pool);
  EXPECT_TRUE(std::is_sorted(costs.rbegin(), costs.rend()));
}

TEST(Pool, NoPlanWhenMemoryDecidesWhatRunsTogether) {
  // As CostsFromHistoryArePlannedFromTheStart, but the two 3 s compiles
  // need 6 GB each in a 10 GB budget: the plan would run them one after
  // the other on one slot, which admission would have to undo. Longest
  // first it is.
  std::vector<WorkItem> items = {item("a", 3, 6 * GB), item("b", 3, 6 * GB), item("c", 2, GB), item("d", 2, GB),
                                 item("e", 2, GB)};
  for (auto& w : items) w.predicted.from_history = true;
  Pool tight(items, {2, 10 * GB, 0});
  EXPECT_EQ(costs_in_order(tight), (std::vector<double>{3, 3, 2, 2, 2}));
  // With room for both at once, the plan.
  Pool roomy(items, {2, 12 * GB, 0});
  EXPECT_EQ(costs_in_order(roomy), (std::vector<double>{3, 2, 2, 3, 2}));
}

TEST(Pool, AColdCacheIsPlannedOnceTwoCompilesGaveTheCostOfSize) {
  // The busy-CPU benchmark's 11 graphs (200 bytes per ms of cost), each
  // compile also taking 22 ms beyond its cost: longest first ends at 2.245 s;
  // the best split at 2.198 s, which the pool reaches once the first two
  // compiles (two sizes) tell it seconds = 0.022 + bytes / 200,000.
  const std::vector<double> cost_ms = {1000, 800, 600, 320, 311, 287, 264, 193, 151, 146, 82};
  std::vector<WorkItem> items;
  std::vector<double> took;
  for (std::size_t i = 0; i < cost_ms.size(); ++i) {
    WorkItem w = item("g" + std::to_string(i), 0);
    w.graph_bytes = static_cast<std::uint64_t>(cost_ms[i] * 200);
    w.predicted.seconds = static_cast<double>(w.graph_bytes) / 1e6; // the cost model's guess from size alone
    items.push_back(w);
    took.push_back(cost_ms[i] / 1000 + 0.022);
  }
  Pool planned(items, {2, 0, 0});
  EXPECT_NEAR(run_pool_to_end(planned, took), 2.198, 1e-9);
  // The same with every graph the same size: nothing to fit, longest first.
  for (auto& w : items) w.graph_bytes = 1000;
  Pool unplanned(items, {2, 0, 0});
  EXPECT_NEAR(run_pool_to_end(unplanned, took), 2.245, 1e-9);
}

TEST(Pool, SizesThatDoNotExplainTheTimesLeaveItLongestFirst) {
  // Times off their size's share by -40% to +50%: no line explains them to
  // 10%, so the pool keeps longest first, and ends where it would without
  // any sizes to fit (the same start order throughout).
  const std::vector<double> cost_ms = {1000, 800, 600, 320, 311, 287, 264, 193, 151, 146, 82};
  const std::vector<double> off = {1.5, 0.6, 1.3, 0.7, 1.4, 0.6, 1.2, 0.8, 1.5, 0.6, 1.0};
  std::vector<WorkItem> items;
  std::vector<double> took;
  for (std::size_t i = 0; i < cost_ms.size(); ++i) {
    WorkItem w = item("g" + std::to_string(i), cost_ms[i] * 200 / 1e6);
    w.graph_bytes = static_cast<std::uint64_t>(cost_ms[i] * 200);
    items.push_back(w);
    took.push_back(cost_ms[i] / 1000 * off[i]);
  }
  Pool sized(items, {2, 0, 0});
  double sized_end = run_pool_to_end(sized, took);
  for (auto& w : items) w.graph_bytes = 1000;
  Pool unsized(items, {2, 0, 0});
  EXPECT_EQ(sized_end, run_pool_to_end(unsized, took));
  EXPECT_EQ(sized.order(), unsized.order());
}

} // namespace
} // namespace npc::launcher
