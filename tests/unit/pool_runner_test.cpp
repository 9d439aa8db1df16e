// launcher/pool_runner: the event loop, driven by a fake runner and a fake
// clock: retries after their backoff, an interrupt, waits on a graph another
// host holds, and what the progress display says. No process starts and no
// test waits: the clock moves only when the loop waits.

#include <npc/launcher/pool_runner.hpp>
#include <npc/cluster/share_owner.hpp>

#include <csignal>
#include <cstdio>
#include <algorithm>
#include <deque>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/layout.hpp>
#include <npc/cache/store.hpp>
#include <npc/util/file_lock.hpp>

#include "test_support.hpp"
#include "two_tiers.hpp"

namespace npc::launcher {

using cluster::Cluster;
using cluster::HeldEntryLook;
using cluster::RollLook;

namespace {

// How one attempt of an item goes: its length, and how it ends.
struct ScriptedAttempt {
  double seconds = 1;
  AttemptEnd end = AttemptEnd::compiled;
  std::string exit = "exit code 0";
};

class FakeRunner final : public WorkerRunner {
public:
  std::map<std::size_t, std::deque<ScriptedAttempt>> script;
  // A signal that arrives at a time.
  double interrupt_at = -1;
  int interrupt_signal = 0;
  // What the loop did.
  std::vector<std::pair<double, AttemptSpec>> starts;
  int stopped_with = 0;
  std::size_t running_when_stopped = 0;
  std::vector<double> waits; // when the loop waited
  // When something outside the workers wakes the loop (a take of a shared
  // lock ending), if anything will.
  std::function<std::optional<double>()> wake_at;

  double now() override { return clock_; }
  // Time spent outside a wait (a request to a shared cache).
  void spend(double seconds) { clock_ += seconds; }

  Status start(const AttemptSpec& attempt) override {
    auto& left = script[attempt.item];
    if (left.empty()) return fail("nothing scripted for item " + std::to_string(attempt.item));
    running_.push_back({attempt, left.front(), clock_ + left.front().seconds});
    left.pop_front();
    starts.emplace_back(clock_, attempt);
    return ok_status();
  }

  Events wait(std::chrono::milliseconds timeout) override {
    // A loop that never ends would run this test forever: a day of fake
    // time is far past anything scripted here.
    if (clock_ > 86400) throw std::runtime_error("the loop did not end");
    waits.push_back(clock_);
    double next = clock_ + static_cast<double>(timeout.count()) / 1000.0;
    for (const auto& r : running_) next = std::min(next, r.ends_at);
    if (wake_at)
      if (auto at = wake_at()) next = std::min(next, std::max(clock_, *at));
    Events events;
    if (interrupt_signal != 0 && interrupt_at <= next) {
      clock_ = std::max(clock_, interrupt_at);
      events.interrupt = interrupt_signal;
      interrupt_signal = 0;
      return events;
    }
    clock_ = next;
    for (auto it = running_.begin(); it != running_.end();) {
      if (it->ends_at > clock_) {
        ++it;
        continue;
      }
      AttemptInfo info;
      info.wall_seconds = it->how.seconds;
      info.exit = it->how.exit;
      info.log_path = it->spec.log;
      events.ended.push_back({it->spec.item, it->how.end, info});
      it = running_.erase(it);
    }
    return events;
  }

  void stop_all(int signal) override {
    stopped_with = signal;
    running_when_stopped = running_.size();
    running_.clear();
  }

  std::size_t running() const override { return running_.size(); }

private:
  struct Running {
    AttemptSpec spec;
    ScriptedAttempt how;
    double ends_at = 0;
  };
  double clock_ = 0;
  std::vector<Running> running_;
};

// A look at a shared cache that finds the graph held `held_looks` times,
// then `then`; each look takes `cost` seconds.
class FakeLook final : public HeldEntryLook {
public:
  FakeLook(FakeRunner& clock, int held_looks, Pool::Found then, double cost = 0)
      : clock_(clock), held_left_(held_looks), then_(then), cost_(cost) {}
  Pool::Found look(const fs::path&) override {
    times.push_back(clock_.now());
    clock_.spend(cost_);
    if (held_left_ > 0) {
      --held_left_;
      return Pool::Found::held_elsewhere;
    }
    return then_;
  }
  std::vector<double> times;

private:
  FakeRunner& clock_;
  int held_left_;
  Pool::Found then_;
  double cost_;
};

class PoolRunnerTest : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    cache = std::make_unique<cache::Cache>(dir() / "cache");
    ASSERT_TRUE(cache->ensure_root());
    out = std::tmpfile();
    ASSERT_NE(out, nullptr);
    config.log_dir = dir() / "logs";
  }
  void TearDown() override {
    if (out) std::fclose(out);
    TempDirTest::TearDown();
  }

  // A pending entry of the cache (graph and flags), as a work item.
  WorkItem pending_item(const std::string& module, double predicted_seconds) {
    auto key = cache::parse_key("neuronxcc-1.0/" + module);
    EXPECT_TRUE(key.has_value()) << module;
    EXPECT_TRUE(cache->entry(*key).store_graph("HloModule " + module, {"-O1"}));
    WorkItem item;
    item.entry_dir = cache->entry_dir(*key);
    item.key = key->str();
    item.graph_bytes = 100;
    item.predicted.seconds = predicted_seconds;
    return item;
  }

  PoolRunResult run(Pool& pool) {
    ProgressDisplay progress(out, false, false);
    return run_pool(pool, *cache, config, progress, runner);
  }

  // The lines the display printed that are not its status line.
  std::vector<std::string> events() const {
    std::fflush(out);
    std::rewind(out);
    std::vector<std::string> lines;
    char buffer[1024];
    while (std::fgets(buffer, sizeof buffer, out)) {
      std::string line(buffer);
      if (!line.empty() && line.back() == '\n') line.pop_back();
      if (line.rfind("neuron_parallel_compile: [", 0) != 0) lines.push_back(line);
    }
    std::fseek(out, 0, SEEK_END);
    return lines;
  }

  std::unique_ptr<cache::Cache> cache;
  RunnerConfig config;
  FakeRunner runner;
  std::FILE* out = nullptr;
};

const std::string kModuleA = "MODULE_a1+abcdef01";
const std::string kModuleB = "MODULE_b2+abcdef01";
const std::string kModuleC = "MODULE_c3+abcdef01";

TEST_F(PoolRunnerTest, RetriesAFailedAttemptAfterItsBackoffAndTellsEachEnd) {
  Pool pool({pending_item(kModuleA, 3)}, {1, 0, 1});
  runner.script[0] = {{3, AttemptEnd::failed, "exit code 70"}, {2, AttemptEnd::compiled}};
  auto ran = run(pool);
  EXPECT_EQ(ran.interrupted_by, 0);
  ASSERT_EQ(runner.starts.size(), 2u);
  EXPECT_EQ(runner.starts[0].first, 0);
  EXPECT_FALSE(runner.starts[0].second.retry);
  EXPECT_GE(runner.starts[1].first, 3 + kRetryBackoffSeconds) << "a retry waits for its backoff";
  EXPECT_LT(runner.starts[1].first, 3 + kRetryBackoffSeconds + 0.01) << "and starts as soon as it is over";
  EXPECT_TRUE(runner.starts[1].second.retry) << "a retry compiles again what the first attempt cached";
  EXPECT_EQ(runner.starts[1].second.log, config.log_dir / (kModuleA + ".attempt2.log"));
  EXPECT_EQ(pool.progress()[0].state, ItemState::compiled);
  EXPECT_EQ(pool.progress()[0].attempts, 2);
  EXPECT_EQ(events(), (std::vector<std::string>{
                          "neuron_parallel_compile: attempt 1 of " + kModuleA + " failed (exit code 70); retrying",
                          "neuron_parallel_compile: compiled " + kModuleA + " in 2.0s"}));
  EXPECT_NEAR(ran.wall_seconds, 3 + kRetryBackoffSeconds + 2, 0.01);
}

TEST_F(PoolRunnerTest, AnAttemptOutOfRetriesIsAFailureWithItsLog) {
  Pool pool({pending_item(kModuleA, 3)}, {1, 0, 0});
  runner.script[0] = {{1, AttemptEnd::failed, "exit code 70"}};
  auto ran = run(pool);
  EXPECT_EQ(ran.interrupted_by, 0);
  EXPECT_EQ(pool.progress()[0].state, ItemState::failed);
  EXPECT_EQ(events(), std::vector<std::string>{"neuron_parallel_compile: FAILED " + kModuleA +
                                               " (exit code 70) after 1 attempt(s); log " +
                                               (config.log_dir / (kModuleA + ".attempt1.log")).string()});
}

TEST_F(PoolRunnerTest, AnInterruptStopsTheRunningAttemptsAndStartsNoMore) {
  Pool pool({pending_item(kModuleA, 10), pending_item(kModuleB, 10), pending_item(kModuleC, 10)}, {2, 0, 0});
  for (std::size_t i = 0; i < 3; ++i) runner.script[i] = {{10, AttemptEnd::compiled}};
  runner.interrupt_at = 4;
  runner.interrupt_signal = SIGTERM;
  auto ran = run(pool);
  EXPECT_EQ(ran.interrupted_by, SIGTERM);
  EXPECT_EQ(runner.stopped_with, SIGTERM) << "passed on to the workers";
  EXPECT_EQ(runner.running_when_stopped, 2u);
  EXPECT_EQ(runner.starts.size(), 2u);
  EXPECT_DOUBLE_EQ(ran.wall_seconds, 4);
  EXPECT_EQ(pool.count(ItemState::compiled), 0u);
}

// A graph another host holds: looked at in the shared cache each time after
// a tenth of how long it has been held, at least 0.2 s (nothing else is
// left to do here) and at most 10 s apart, and never with a worker started
// for it.
TEST_F(PoolRunnerTest, AGraphHeldElsewhereIsLookedAtWithABackoffUntilItsResultLands) {
  Pool pool({pending_item(kModuleA, 60)}, {4, 0, 0});
  pool.mark_held_elsewhere(0, 0);
  auto look = std::make_shared<FakeLook>(runner, 3, Pool::Found::done);
  config.cluster = std::make_shared<Cluster>(nullptr, look);
  auto ran = run(pool);
  EXPECT_EQ(ran.interrupted_by, 0);
  EXPECT_TRUE(runner.starts.empty());
  const std::vector<double> expected = {0.5, 0.7, 0.9, 1.1};
  ASSERT_EQ(look->times.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(look->times[i], expected[i], 0.01) << "look " << i;
  EXPECT_EQ(pool.progress()[0].state, ItemState::compiled_elsewhere);
  EXPECT_EQ(events(), std::vector<std::string>{"neuron_parallel_compile: compiled by another node, downloaded: " +
                                               kModuleA});
}

// A long hold: each look comes a tenth of the time held so far after the
// last, never sooner than 0.2 s (the launcher has nothing else to do) nor
// later than 10 s.
TEST_F(PoolRunnerTest, TheLooksAtAGraphHeldElsewhereSpreadOutAsItStaysHeld) {
  Pool pool({pending_item(kModuleA, 600)}, {4, 0, 0});
  pool.mark_held_elsewhere(0, 0);
  auto look = std::make_shared<FakeLook>(runner, 60, Pool::Found::done);
  config.cluster = std::make_shared<Cluster>(nullptr, look);
  std::ignore = run(pool);
  ASSERT_EQ(look->times.size(), 61u);
  EXPECT_NEAR(look->times[0], kHeldElsewhereMinPollSeconds, 0.01) << "the first look after the take's";
  for (std::size_t i = 1; i < look->times.size(); ++i) {
    double since = look->times[i - 1];
    EXPECT_NEAR(look->times[i] - since, std::clamp(since / 10, kOutOfWorkMinPollSeconds, 10.0), 0.01)
        << "look " << i << " at " << since;
  }
  EXPECT_NEAR(look->times.back() - look->times[look->times.size() - 2], 10, 0.01) << "the gaps reached the ceiling";
  EXPECT_EQ(pool.progress()[0].state, ItemState::compiled_elsewhere);
}

// A shared tier whose locks the launcher takes itself: every look finds
// the graph pending; take_lock answers from a script per entry (taken when
// the script is empty), and every take and release is written down.
class LockingLook final : public HeldEntryLook {
public:
  explicit LockingLook(FakeRunner& clock) : clock_(clock) {}
  Pool::Found look(const fs::path&) override { return Pool::Found::pending; }
  Take take_lock(const fs::path& entry_dir) override {
    auto& left = script[entry_dir.filename().string()];
    Take take = Take::taken();
    if (!left.empty()) {
      take = left.front();
      left.pop_front();
    }
    taken.emplace_back(clock_.now(), entry_dir.filename().string() + (take == Take::taken() ? " taken"
                                                                       : take.found == Pool::Found::held_elsewhere
                                                                           ? " held"
                                                                           : " done"));
    return take;
  }
  void attempt_ended(const fs::path& entry_dir) override {
    released.emplace_back(clock_.now(), entry_dir.filename().string());
  }
  void finish() override { finished_at = clock_.now(); }
  double finished_at = -1;
  std::map<std::string, std::deque<Take>> script;
  std::vector<std::pair<double, std::string>> taken, released;

private:
  FakeRunner& clock_;
};

// The launcher takes the shared lock before a worker starts: a graph another
// host holds starts no worker (it is looked at again), a taken one starts a
// worker started without --shared-cache (the graph is brought), and each
// attempt's end is passed on (its upload, then the lock's release), at once
// when the worker could not start; the run waits for those before it ends.
TEST_F(PoolRunnerTest, TheLauncherTakesTheSharedLockBeforeTheWorkerAndReleasesItAfter) {
  Pool pool({pending_item(kModuleA, 30), pending_item(kModuleB, 20), pending_item(kModuleC, 10)}, {4, 0, 0});
  auto look = std::make_shared<LockingLook>(runner);
  look->script[kModuleA] = {HeldEntryLook::Take::as_found(Pool::Found::held_elsewhere)};
  config.cluster = std::make_shared<Cluster>(nullptr, look);
  runner.script[0] = {{4, AttemptEnd::compiled}};
  runner.script[1] = {{3, AttemptEnd::compiled}};
  // Nothing scripted for C: its worker cannot start.
  auto ran = run(pool);
  EXPECT_EQ(ran.interrupted_by, 0);
  ASSERT_EQ(runner.starts.size(), 2u);
  EXPECT_EQ(runner.starts[0].second.item, 1u);
  EXPECT_DOUBLE_EQ(runner.starts[0].first, 0);
  EXPECT_TRUE(runner.starts[0].second.shared_lock_held);
  // A was held at first: its next look, half a second later, finds it
  // pending; the lock is taken then and its worker starts.
  EXPECT_EQ(runner.starts[1].second.item, 0u);
  EXPECT_NEAR(runner.starts[1].first, 0.5, 0.01);
  EXPECT_TRUE(runner.starts[1].second.shared_lock_held);
  const std::vector<std::pair<double, std::string>> taken = {
      {0, kModuleA + " held"}, {0, kModuleB + " taken"}, {0, kModuleC + " taken"}, {0.5, kModuleA + " taken"}};
  ASSERT_EQ(look->taken.size(), taken.size());
  for (std::size_t i = 0; i < taken.size(); ++i) {
    EXPECT_NEAR(look->taken[i].first, taken[i].first, 0.01) << i;
    EXPECT_EQ(look->taken[i].second, taken[i].second) << i;
  }
  ASSERT_EQ(look->released.size(), 3u);
  EXPECT_EQ(look->released[0], (std::pair<double, std::string>{0, kModuleC}));
  EXPECT_EQ(look->released[1], (std::pair<double, std::string>{3, kModuleB}));
  EXPECT_NEAR(look->released[2].first, 4.5, 0.01);
  EXPECT_EQ(look->released[2].second, kModuleA);
  EXPECT_NEAR(look->finished_at, 4.5, 0.01) << "the run waits for the uploads";
  EXPECT_EQ(pool.progress()[0].state, ItemState::compiled);
  EXPECT_EQ(pool.progress()[1].state, ItemState::compiled);
  EXPECT_EQ(pool.progress()[2].state, ItemState::failed);
}

// Another host compiled the graph between the look and the lock: no worker
// starts, and it counts as compiled there.
TEST_F(PoolRunnerTest, AGraphFoundDoneOnceItsLockIsTakenStartsNoWorker) {
  Pool pool({pending_item(kModuleA, 30)}, {4, 0, 0});
  auto look = std::make_shared<LockingLook>(runner);
  look->script[kModuleA] = {HeldEntryLook::Take::as_found(Pool::Found::done)};
  config.cluster = std::make_shared<Cluster>(nullptr, look);
  std::ignore = run(pool);
  EXPECT_TRUE(runner.starts.empty());
  EXPECT_TRUE(look->released.empty());
  EXPECT_EQ(pool.progress()[0].state, ItemState::compiled_elsewhere);
  EXPECT_EQ(events(), std::vector<std::string>{"neuron_parallel_compile: compiled by another node, downloaded: " +
                                               kModuleA});
}

// A shared tier whose takes run beside the loop, `cost` seconds each, as on
// the launcher's transfer threads: the end of each is scripted per entry
// (taken when the script is empty).
class SlowTakeLook final : public HeldEntryLook {
public:
  SlowTakeLook(FakeRunner& clock, double cost) : clock_(clock), cost_(cost) {
    clock_.wake_at = [this]() -> std::optional<double> {
      if (running_.empty()) return std::nullopt;
      double first = running_.front().ends_at;
      for (const auto& r : running_) first = std::min(first, r.ends_at);
      return first;
    };
  }
  ~SlowTakeLook() override { clock_.wake_at = nullptr; }
  Pool::Found look(const fs::path& entry_dir) override {
    looked.push_back(entry_dir.filename().string());
    return Pool::Found::pending;
  }
  void begin_take(std::size_t item, const fs::path& entry_dir) override {
    auto& left = script[entry_dir.filename().string()];
    Take take = Take::taken();
    if (!left.empty()) {
      take = left.front();
      left.pop_front();
    }
    begun.emplace_back(clock_.now(), entry_dir.filename().string());
    running_.push_back({item, take, clock_.now() + cost_});
  }
  std::vector<TakeEnded> takes_ended() override {
    std::vector<TakeEnded> ended;
    for (auto it = running_.begin(); it != running_.end();) {
      if (it->ends_at > clock_.now()) {
        ++it;
        continue;
      }
      ended.push_back({it->item, it->take});
      it = running_.erase(it);
    }
    return ended;
  }
  void attempt_ended(const fs::path& entry_dir) override {
    released.emplace_back(clock_.now(), entry_dir.filename().string());
  }
  std::map<std::string, std::deque<Take>> script;
  std::vector<std::pair<double, std::string>> begun, released;
  std::vector<std::string> looked;

private:
  struct Running {
    std::size_t item;
    Take take;
    double ends_at;
  };
  FakeRunner& clock_;
  double cost_;
  std::vector<Running> running_;
};

// The takes of the slots free at once run together, and each worker starts
// when its take ends: three slots, takes of 0.2 s, all three workers start
// at 0.2 s (one after another, the last would start at 0.6 s). A take that
// finds the graph held gives its slot back at once, to the next graph, and
// a compile's time counts from its worker's start.
TEST_F(PoolRunnerTest, TakesOfSharedLocksRunTogetherBesideTheLoop) {
  const std::string kModuleD = "MODULE_d4+abcdef01";
  Pool pool({pending_item(kModuleA, 40), pending_item(kModuleB, 30), pending_item(kModuleC, 20),
             pending_item(kModuleD, 10)},
            {3, 0, 0});
  auto look = std::make_shared<SlowTakeLook>(runner, 0.2);
  look->script[kModuleA] = {HeldEntryLook::Take::as_found(Pool::Found::held_elsewhere)};
  config.cluster = std::make_shared<Cluster>(nullptr, look);
  runner.script[1] = {{3, AttemptEnd::compiled}};
  runner.script[2] = {{2, AttemptEnd::compiled}};
  runner.script[3] = {{1, AttemptEnd::compiled}};
  runner.script[0] = {{4, AttemptEnd::compiled}};
  auto ran = run(pool);
  EXPECT_EQ(ran.interrupted_by, 0);
  // A, B and C at once; D when A's take gave its slot back; A again once
  // its next look is due (half a second after it was found held) and a
  // slot is free (D's, at 1.4 s).
  const std::vector<std::pair<double, std::string>> begun = {
      {0, kModuleA}, {0, kModuleB}, {0, kModuleC}, {0.2, kModuleD}, {1.4, kModuleA}};
  ASSERT_EQ(look->begun.size(), begun.size());
  for (std::size_t i = 0; i < begun.size(); ++i) {
    EXPECT_NEAR(look->begun[i].first, begun[i].first, 0.01) << i;
    EXPECT_EQ(look->begun[i].second, begun[i].second) << i;
  }
  ASSERT_EQ(runner.starts.size(), 4u);
  const std::vector<std::pair<double, std::size_t>> starts = {{0.2, 1}, {0.2, 2}, {0.4, 3}, {1.6, 0}};
  for (std::size_t i = 0; i < starts.size(); ++i) {
    EXPECT_NEAR(runner.starts[i].first, starts[i].first, 0.01) << i;
    EXPECT_EQ(runner.starts[i].second.item, starts[i].second) << i;
    EXPECT_TRUE(runner.starts[i].second.shared_lock_held) << i;
    EXPECT_EQ(runner.starts[i].second.log.filename().string(),
              pool.items()[starts[i].second].entry_dir.filename().string() + ".attempt1.log")
        << i;
  }
  EXPECT_EQ(look->released.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(pool.progress()[i].state, ItemState::compiled) << i;
    EXPECT_EQ(pool.progress()[i].attempts, 1) << i;
  }
  EXPECT_EQ(pool.running(), 0);
}

// The roll of launchers as a test sets it: told once, at the first look.
class FixedRoll final : public RollLook {
public:
  FixedRoll(std::string self, std::vector<std::string> members)
      : self_(std::move(self)), members_(std::move(members)) {}
  const std::string& self() const override { return self_; }
  std::optional<std::vector<std::string>> changed(double) override {
    if (told_) return std::nullopt;
    told_ = true;
    return members_;
  }

private:
  std::string self_;
  std::vector<std::string> members_;
  bool told_ = false;
};

// Two launchers on the roll split the graphs: this one starts its own
// share first, costliest first, taking their locks without a look (no other
// launcher starts them); then the other's, each looked at first (its owner
// may have started it). The shares are share_owner's.
TEST_F(PoolRunnerTest, ItsOwnShareIsTakenFirstAndWithoutALook) {
  const std::vector<std::string> modules = {kModuleA, kModuleB, kModuleC, "MODULE_d4+abcdef01", "MODULE_e5+abcdef01",
                                            "MODULE_f6+abcdef01"};
  const std::vector<std::string> roll = {"me", "other"};
  std::vector<WorkItem> items;
  std::vector<std::string> own, others; // costliest first
  for (std::size_t i = 0; i < modules.size(); ++i) {
    items.push_back(pending_item(modules[i], 60 - 10 * static_cast<double>(i)));
    (roll[cluster::share_owner(items.back().key, roll)] == "me" ? own : others).push_back(modules[i]);
  }
  ASSERT_FALSE(own.empty());
  ASSERT_FALSE(others.empty());
  Pool pool(std::move(items), {1, 0, 0});
  auto look = std::make_shared<SlowTakeLook>(runner, 0.1);
  config.cluster = std::make_shared<Cluster>(std::make_shared<FixedRoll>("me", roll), look);
  for (std::size_t i = 0; i < modules.size(); ++i) runner.script[i] = {{1, AttemptEnd::compiled}};
  auto ran = run(pool);
  EXPECT_EQ(ran.interrupted_by, 0);
  EXPECT_TRUE(pool.shares_split());
  std::vector<std::string> expected = own;
  expected.insert(expected.end(), others.begin(), others.end());
  std::vector<std::string> begun;
  for (const auto& [at, module] : look->begun) begun.push_back(module);
  EXPECT_EQ(begun, expected);
  EXPECT_EQ(look->looked, others);
  for (std::size_t i = 0; i < modules.size(); ++i) EXPECT_EQ(pool.progress()[i].state, ItemState::compiled) << i;
}

// Late in a run most graphs a launcher passes are done or held elsewhere,
// and passing each costs a look: the picks' looks stop for the tick once
// they have taken kHeldLookBudgetPerTick, and the loop reaps what ended
// before it goes on, with no wait between. Looks of 0.1 s: A, B and C in
// the first tick (A's worker starts at 0.3 s, and ends at 0.4 s), D, E and
// F in the second, after which A's end is reaped (at 0.6 s, not after the
// other four looks).
TEST_F(PoolRunnerTest, ThePicksLooksStopForTheTickOnceTheirBudgetIsSpent) {
  class SlowHeldLook final : public HeldEntryLook {
  public:
    explicit SlowHeldLook(FakeRunner& clock) : clock_(clock) {}
    Pool::Found look(const fs::path& entry_dir) override {
      clock_.spend(0.1);
      return entry_dir.filename().string() == kModuleA ? Pool::Found::pending : Pool::Found::held_elsewhere;
    }

  private:
    FakeRunner& clock_;
  };
  std::vector<WorkItem> items = {pending_item(kModuleA, 100)};
  for (int i = 0; i < 9; ++i)
    items.push_back(pending_item("MODULE_e" + std::to_string(i) + "+abcdef01", 10.0 - i));
  Pool pool(std::move(items), {2, 0, 0});
  config.cluster = std::make_shared<Cluster>(nullptr, std::make_shared<SlowHeldLook>(runner));
  runner.script[0] = {{0.1, AttemptEnd::compiled}};
  runner.interrupt_at = 0.65; // the rest is not this test's
  runner.interrupt_signal = SIGTERM;
  std::ignore = run(pool);
  ASSERT_EQ(runner.starts.size(), 1u);
  EXPECT_NEAR(runner.starts[0].first, 0.3, 1e-9);
  ASSERT_GE(runner.waits.size(), 2u);
  EXPECT_NEAR(runner.waits[0], 0.3, 1e-9);
  EXPECT_NEAR(runner.waits[1], 0.6, 1e-9);
  EXPECT_EQ(pool.progress()[0].state, ItemState::compiled);
  EXPECT_EQ(pool.count(ItemState::deferred), 8u) << "B to I looked at by the interrupt (G to I in a third tick)";
}

// Alone (no cluster, or one without a shared tier), the launcher takes no
// lock: each worker takes its own in the directory.
TEST_F(PoolRunnerTest, AloneTheLauncherTakesNoLockAndEveryWorkerTakesItsOwn) {
  Pool pool({pending_item(kModuleA, 30), pending_item(kModuleB, 20)}, {4, 0, 0});
  config.cluster = std::make_shared<Cluster>();
  runner.script[0] = {{4, AttemptEnd::compiled}};
  runner.script[1] = {{3, AttemptEnd::compiled}};
  auto ran = run(pool);
  EXPECT_EQ(ran.interrupted_by, 0);
  ASSERT_EQ(runner.starts.size(), 2u);
  for (const auto& [at, spec] : runner.starts) {
    EXPECT_EQ(at, 0) << "both start at once";
    EXPECT_FALSE(spec.shared_lock_held);
  }
  EXPECT_EQ(pool.count(ItemState::compiled), 2u);
  EXPECT_NEAR(ran.wall_seconds, 4, 1e-9);
}

// Launchers sharing a cache walk the graphs in the same order: a graph
// another one finished before this one's turn came gets no worker.
TEST_F(PoolRunnerTest, AGraphAnotherProcessFinishedBeforeItsTurnGetsNoWorker) {
  Pool pool({pending_item(kModuleA, 10), pending_item(kModuleB, 5)}, {1, 0, 0});
  test::publish_test_result(cache->entry(pool.items()[1].entry_dir), true, "NEFF", dir() / "result");
  runner.script[0] = {{10, AttemptEnd::compiled}};
  auto ran = run(pool);
  EXPECT_EQ(ran.interrupted_by, 0);
  ASSERT_EQ(runner.starts.size(), 1u);
  EXPECT_EQ(runner.starts[0].second.item, 0u);
  EXPECT_EQ(pool.progress()[1].state, ItemState::compiled_elsewhere);
  EXPECT_EQ(pool.progress()[1].attempts, 0);
  // B is looked at when a slot is free for it: once A has ended.
  EXPECT_EQ(events(), (std::vector<std::string>{"neuron_parallel_compile: compiled " + kModuleA + " in 10.0s",
                                                "neuron_parallel_compile: compiled by another process: " + kModuleB}));
}

// On a shared tier, a graph is looked at there before its lock is taken:
// one found done or held elsewhere gets no take and no worker.
TEST_F(PoolRunnerTest, AGraphIsLookedAtInTheSharedTierBeforeItsLockIsTaken) {
  Pool pool({pending_item(kModuleA, 10), pending_item(kModuleB, 5), pending_item(kModuleC, 5)}, {4, 0, 0});
  pool.mark_held_elsewhere(0, 0);
  auto look = std::make_shared<FakeLook>(runner, 1, Pool::Found::done);
  config.cluster = std::make_shared<Cluster>(nullptr, look);
  auto ran = run(pool);
  EXPECT_EQ(ran.interrupted_by, 0);
  // B: held at its look, then found done; C: found done at once, no worker either.
  ASSERT_EQ(look->times.size(), 4u);
  EXPECT_TRUE(runner.starts.empty());
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(pool.progress()[i].state, ItemState::compiled_elsewhere) << i;
}

// A holder that keeps its lock past --lock-timeout is left to itself, as a
// waiting wrapper gives up then; the run ends instead of waiting for ever.
TEST_F(PoolRunnerTest, AHolderKeepingItsLockPastTheLockTimeoutIsLeftToIt) {
  Pool pool({pending_item(kModuleA, 60)}, {4, 0, 0});
  pool.mark_held_elsewhere(0, 0);
  config.stale_lock_age = std::chrono::seconds(30);
  config.cluster = std::make_shared<Cluster>(nullptr, std::make_shared<FakeLook>(runner, 1000, Pool::Found::done));
  auto ran = run(pool);
  EXPECT_EQ(pool.progress()[0].state, ItemState::locked_elsewhere);
  EXPECT_GE(ran.wall_seconds, 30);
  EXPECT_LT(ran.wall_seconds, 31);
  EXPECT_EQ(events(), std::vector<std::string>{"neuron_parallel_compile: locked by another node for over 30.0s "
                                               "(--lock-timeout), left to it: " + kModuleA});
  EXPECT_TRUE(runner.starts.empty());
}

// Looks cost a request each: once a tick's looks have taken the budget,
// the loop goes back to its wait (workers, signals) before the rest.
TEST_F(PoolRunnerTest, LooksStopForATickOnceTheyTookItsBudget) {
  Pool pool({pending_item(kModuleA, 60), pending_item(kModuleB, 60), pending_item(kModuleC, 60)}, {4, 0, 0});
  for (std::size_t i = 0; i < 3; ++i) pool.mark_held_elsewhere(i, 0);
  const double cost = std::chrono::duration<double>(kHeldLookBudgetPerTick).count() * 0.6;
  auto look = std::make_shared<FakeLook>(runner, 0, Pool::Found::done, cost);
  config.cluster = std::make_shared<Cluster>(nullptr, look);
  auto ran = run(pool);
  EXPECT_EQ(ran.interrupted_by, 0);
  ASSERT_EQ(look->times.size(), 3u);
  // Two looks fit in the budget (the second starts within it), the third
  // waits for the next tick.
  EXPECT_NEAR(look->times[1], look->times[0] + cost, 1e-9);
  auto waited_between = std::find_if(runner.waits.begin(), runner.waits.end(), [&](double t) {
    return t > look->times[1] && t <= look->times[2];
  });
  EXPECT_NE(waited_between, runner.waits.end()) << "the loop waited before the third look";
  EXPECT_EQ(pool.count(ItemState::compiled_elsewhere), 3u);
}

// A graph found pending again in the shared cache (its holder let go) is
// compiled here.
TEST_F(PoolRunnerTest, AGraphLetGoElsewhereIsCompiledHere) {
  Pool pool({pending_item(kModuleA, 5)}, {4, 0, 0});
  pool.mark_held_elsewhere(0, 0);
  config.cluster = std::make_shared<Cluster>(nullptr, std::make_shared<FakeLook>(runner, 1, Pool::Found::pending));
  runner.script[0] = {{5, AttemptEnd::compiled}};
  auto ran = run(pool);
  ASSERT_EQ(runner.starts.size(), 1u);
  EXPECT_NEAR(runner.starts[0].first, kHeldElsewhereMinPollSeconds + kOutOfWorkMinPollSeconds, 0.01)
      << "the second look found it free";
  EXPECT_EQ(pool.progress()[0].state, ItemState::compiled);
  EXPECT_NEAR(ran.wall_seconds, kHeldElsewhereMinPollSeconds + kOutOfWorkMinPollSeconds + 5, 0.01);
}

// Graphs other processes hold, once they are all that is left, are said in
// one line counted by holder, and so are those left to their holders: not
// a line per graph (a step of 16 tasks over thousands of graphs).
TEST_F(PoolRunnerTest, GraphsHeldByOthersAreSaidInOneLineCountedByHolder) {
  const std::string kModuleD = "MODULE_d4+abcdef01";
  std::vector<WorkItem> items = {pending_item(kModuleA, 5), pending_item(kModuleB, 5), pending_item(kModuleC, 5),
                                 pending_item(kModuleD, 5)};
  // Holders on other hosts, whose liveness cannot be told: their fresh
  // locks hold, and the graphs are left to them.
  auto owner = [](pid_t pid, const std::string& host) {
    util::LockHolder holder;
    holder.pid = pid;
    holder.host = host;
    holder.start_unix = 1700000000;
    holder.tool = "torch-neuronx";
    return holder.serialize() + "\n";
  };
  test::write_text(items[0].entry_dir / cache::kFrameworkLockFile, owner(11, "node-x"));
  test::write_text(items[1].entry_dir / cache::kFrameworkLockFile, "");
  test::write_text(items[2].entry_dir / cache::kFrameworkLockFile, owner(11, "node-x"));
  test::write_text(items[3].entry_dir / cache::kFrameworkLockFile, owner(12, "node-y"));
  Pool pool(std::move(items), {4, 0, 0});
  auto ran = run(pool);
  EXPECT_EQ(ran.interrupted_by, 0);
  EXPECT_TRUE(runner.starts.empty());
  EXPECT_EQ(pool.count(ItemState::locked_elsewhere), 4u);
  const std::string by_holder =
      "4 graphs: 2 held by pid 11 on node-x (torch-neuronx), since 2023-11-14T22:13:20Z (" + kModuleA + ", " +
      kModuleC + "); 1 held by pid 12 on node-y (torch-neuronx), since 2023-11-14T22:13:20Z (" + kModuleD +
      "); 1 held by whoever made their locks (they name no owner) (" + kModuleB + ")";
  EXPECT_EQ(events(), (std::vector<std::string>{
                          "neuron_parallel_compile: waiting for " + by_holder,
                          "neuron_parallel_compile: locked by other processes, left to them: " + by_holder}));
}

// What cannot start is a failed attempt blamed on its surroundings, and the
// rest of the pool goes on.
TEST_F(PoolRunnerTest, AnAttemptThatCannotStartFailsAndTheOthersRun) {
  Pool pool({pending_item(kModuleA, 5), pending_item(kModuleB, 4)}, {2, 0, 0});
  runner.script[1] = {{4, AttemptEnd::compiled}}; // nothing for item 0: its start fails
  auto ran = run(pool);
  EXPECT_EQ(ran.interrupted_by, 0);
  EXPECT_EQ(pool.progress()[0].state, ItemState::failed);
  EXPECT_EQ(pool.progress()[0].last_blame, Blame::surroundings);
  EXPECT_EQ(pool.progress()[0].last_exit, "could not start: nothing scripted for item 0");
  EXPECT_EQ(pool.progress()[1].state, ItemState::compiled);
}

// --- the trace (run_trace.hpp) ------------------------------------------------

constexpr std::int64_t kTraceZeroUs = 1'000'000'000'000'000; // the fake clock's 0, in µs since the epoch

std::vector<nlohmann::json> trace_events_of(const RunTrace& trace, const std::string& phase,
                                            const std::string& category = "") {
  std::vector<nlohmann::json> found;
  for (const auto& e : trace.events().events())
    if (e["ph"] == phase && (category.empty() || e.value("cat", "") == category)) found.push_back(e);
  return found;
}

// Two slots, a failure retried: each attempt is one span on the lane of the
// slot it held, the lowest free one, with its outcome and retry number.
TEST_F(PoolRunnerTest, TheTraceHasEachAttemptOnTheSlotItRanInWithItsOutcome) {
  Pool pool({pending_item(kModuleA, 3), pending_item(kModuleB, 2), pending_item(kModuleC, 1)}, {2, 0, 1});
  runner.script[0] = {{3, AttemptEnd::failed, "exit code 70"}, {2, AttemptEnd::compiled}};
  runner.script[1] = {{2, AttemptEnd::compiled}};
  runner.script[2] = {{1, AttemptEnd::compiled}};
  RunTrace trace("launcher", 0, kTraceZeroUs);
  config.trace = &trace;
  auto ran = run(pool);
  ASSERT_EQ(ran.interrupted_by, 0);
  auto spans = trace_events_of(trace, "X", "compile");
  ASSERT_EQ(spans.size(), 4u);
  struct Expected {
    std::string name;
    int lane;
    double start, seconds;
    std::string outcome;
    int attempt;
  };
  // B ends first (at 2 s), C takes its slot; A fails at 3 s and its retry,
  // 0.5 s later, takes the slot it freed.
  const std::vector<Expected> expected = {{kModuleB, 2, 0, 2, "compiled", 1},
                                          {kModuleA, 1, 0, 3, "failed", 1},
                                          {kModuleC, 2, 2, 1, "compiled", 1},
                                          {kModuleA, 1, 3 + kRetryBackoffSeconds, 2, "compiled", 2}};
  for (std::size_t k = 0; k < expected.size(); ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(spans[k]["name"], expected[k].name);
    EXPECT_EQ(spans[k]["tid"], expected[k].lane);
    EXPECT_NEAR(spans[k]["ts"].get<double>(), kTraceZeroUs + expected[k].start * 1e6, 2000);
    EXPECT_NEAR(spans[k]["dur"].get<double>(), expected[k].seconds * 1e6, 2000);
    EXPECT_EQ(spans[k]["args"]["outcome"], expected[k].outcome);
    EXPECT_EQ(spans[k]["args"]["attempt"], expected[k].attempt);
    EXPECT_EQ(spans[k]["args"]["retry"], expected[k].attempt - 1);
  }
  EXPECT_EQ(spans[1]["args"]["exit"], "exit code 70");
  // Two lanes named, and the running compiles counted: 2, then 0 at the end.
  std::vector<std::string> lanes;
  for (const auto& e : trace_events_of(trace, "M"))
    if (e["name"] == "thread_name") lanes.push_back(e["args"]["name"]);
  EXPECT_EQ(lanes, (std::vector<std::string>{"launcher", "worker slot 1", "worker slot 2"}));
  std::vector<int> running;
  for (const auto& e : trace_events_of(trace, "C"))
    if (e["name"] == "compiles running") running.push_back(e["args"]["running"]);
  ASSERT_FALSE(running.empty());
  EXPECT_EQ(running.front(), 2);
  EXPECT_EQ(running.back(), 0);
  EXPECT_EQ(*std::max_element(running.begin(), running.end()), 2);
}

// A graph another host holds: a wait from when it was found held to when its
// result was found, on a track of its own.
TEST_F(PoolRunnerTest, TheTraceShowsTheWaitForAGraphHeldElsewhere) {
  Pool pool({pending_item(kModuleA, 60)}, {4, 0, 0});
  pool.mark_held_elsewhere(0, 0);
  config.cluster = std::make_shared<Cluster>(nullptr, std::make_shared<FakeLook>(runner, 3, Pool::Found::done));
  RunTrace trace("launcher", 0, kTraceZeroUs);
  config.trace = &trace;
  std::ignore = run(pool);
  auto begins = trace_events_of(trace, "b", "wait");
  auto ends = trace_events_of(trace, "e", "wait");
  ASSERT_EQ(begins.size(), 1u);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(begins[0]["name"], kModuleA);
  EXPECT_EQ(begins[0]["id"], ends[0]["id"]);
  EXPECT_EQ(begins[0]["args"]["held_by"], "another host");
  EXPECT_EQ(begins[0]["ts"].get<std::int64_t>(), kTraceZeroUs);
  // The loop wakes a millisecond after each look is due.
  EXPECT_NEAR(ends[0]["ts"].get<double>(),
              kTraceZeroUs + (kHeldElsewhereMinPollSeconds + 3 * kOutOfWorkMinPollSeconds) * 1e6, 5000)
      << "its result was found at the 4th look";
  EXPECT_TRUE(trace_events_of(trace, "X", "compile").empty());
}

// An interrupt: the attempts it stopped end in the trace where it came.
TEST_F(PoolRunnerTest, TheTraceEndsTheAttemptsAnInterruptStopped) {
  Pool pool({pending_item(kModuleA, 10), pending_item(kModuleB, 10)}, {2, 0, 0});
  for (std::size_t i = 0; i < 2; ++i) runner.script[i] = {{10, AttemptEnd::compiled}};
  runner.interrupt_at = 4;
  runner.interrupt_signal = SIGINT;
  RunTrace trace("launcher", 0, kTraceZeroUs);
  config.trace = &trace;
  std::ignore = run(pool);
  auto spans = trace_events_of(trace, "X", "compile");
  ASSERT_EQ(spans.size(), 2u);
  for (const auto& span : spans) {
    EXPECT_EQ(span["args"]["outcome"], "interrupted");
    EXPECT_EQ(span["args"]["exit"], "stopped by an interrupt");
    EXPECT_EQ(span["dur"].get<std::int64_t>(), 4'000'000);
  }
}

} // namespace
} // namespace npc::launcher
