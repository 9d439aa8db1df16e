#include <npc/storage/lock.hpp>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <npc/util/fs.hpp>
#include <npc/util/signals.hpp>
#include <npc/util/strings.hpp>

namespace npc::storage {

namespace {

using nlohmann::json;

// A record is a few hundred bytes. Anything up to this is read and judged
// as garbage; a bigger object is judged without its bytes, and so never
// broken by a compile (clear-locks removes it).
constexpr std::uint64_t kMaxLockBytes = 1024 * 1024;

std::int64_t unix_seconds(Time t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

// What is at `key`: nullopt when nothing is (released, or broken meanwhile).
// A lock can go and come again between a failed read and the look after
// it: read again then.
Result<std::optional<std::string>> read_if_there(const Storage& storage, std::string_view key) {
  for (int attempt = 0;; ++attempt) {
    auto text = storage.read(key, kMaxLockBytes);
    if (text) return std::optional<std::string>(std::move(*text));
    auto there = storage.stat(key);
    if (there && !*there) return std::optional<std::string>{};
    if (attempt == 2) return fail(text.error());
  }
}

} // namespace

std::string LockRecord::serialize() const {
  return json{{"owner", owner}, {"token", token}, {"expires", expires_unix}}.dump() + "\n";
}

std::optional<LockRecord> LockRecord::parse(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    auto owner = j.find("owner");
    auto token = j.find("token");
    auto expires = j.find("expires");
    if (owner == j.end() || !owner->is_string() || token == j.end() || !token->is_string() ||
        token->get_ref<const std::string&>().empty() ||
        expires == j.end() || !expires->is_number_integer())
      return std::nullopt;
    return LockRecord{owner->get<std::string>(), token->get<std::string>(), expires->get<std::int64_t>()};
  }
  // An older release's lock: its owner facts, one line.
  if (auto holder = util::LockHolder::parse(text)) return LockRecord{holder->serialize(), "", 0};
  return std::nullopt;
}

std::string_view to_string(LockState state) {
  switch (state) {
  case LockState::absent: return "absent";
  case LockState::held_alive: return "held";
  case LockState::held: return "held";
  case LockState::stale_dead: return "its owner is gone";
  case LockState::stale_expired: return "past its expiry";
  case LockState::stale_old: return "older than the stale-lock age";
  }
  return "?";
}

std::string LockFacts::holder() const {
  // An expiry matters where liveness cannot be proved.
  std::string until;
  if (record && record->expires_unix > 0 && state != LockState::held_alive && state != LockState::stale_dead)
    until = ", until " + util::format_utc(Time(std::chrono::seconds(record->expires_unix)));
  if (owner) return owner->describe() + until;
  if (record) return "'" + record->owner + "'" + until;
  return "whoever made it (it names no owner), " + util::format_seconds(age_seconds) + " ago";
}

std::string LockFacts::describe() const {
  std::string age = util::format_seconds(age_seconds) + " old";
  if (record) return "held by " + holder() + ", " + age;
  return "without owner facts (the framework's, or garbage), " + age;
}

Result<LockFacts> judge_lock(const Storage& storage, std::string_view key, std::chrono::seconds stale_age, Time now) {
  auto info = storage.stat(key);
  if (!info) return fail(info.error());
  if (!*info) return LockFacts{};
  std::string bytes;
  if (!(*info)->directory && (*info)->size <= kMaxLockBytes) {
    auto text = read_if_there(storage, key);
    if (!text) return fail(text.error());
    if (!*text) return LockFacts{}; // gone since the stat
    bytes = std::move(**text);
  } else if (!(*info)->directory) {
    bytes = "(more than 1 MiB)"; // never equal to what is there: not broken
  }
  return judge_lock_read(std::move(bytes), (*info)->modified, stale_age, now);
}

Result<LockFacts> judge_listed_lock(const Storage& storage, std::string_view key, std::uint64_t size,
                                    Time modified, std::chrono::seconds stale_age, Time now) {
  std::string bytes = "(more than 1 MiB)"; // as judge_lock: never equal to what is there
  if (size <= kMaxLockBytes) {
    auto text = read_if_there(storage, key);
    if (!text) return fail(text.error());
    if (!*text) return LockFacts{}; // gone since the listing
    bytes = std::move(**text);
  }
  return judge_lock_read(std::move(bytes), modified, stale_age, now);
}

LockFacts judge_lock_read(std::string bytes, Time modified, std::chrono::seconds stale_age, Time now) {
  LockFacts facts;
  facts.modified = modified;
  facts.age_seconds = std::max(0.0, std::chrono::duration<double>(now - modified).count());
  facts.bytes = std::move(bytes);
  facts.record = LockRecord::parse(facts.bytes);
  if (facts.record) facts.owner = facts.record->holder();
  util::Liveness owner = facts.owner ? util::liveness(*facts.owner) : util::Liveness::unknown;
  if (owner == util::Liveness::alive) facts.state = LockState::held_alive;
  else if (owner == util::Liveness::dead) facts.state = LockState::stale_dead;
  else if (facts.record && facts.record->expires_unix > 0)
    facts.state = facts.record->expires_unix > unix_seconds(now) ? LockState::held : LockState::stale_expired;
  else if (facts.age_seconds > static_cast<double>(stale_age.count())) facts.state = LockState::stale_old;
  else facts.state = LockState::held;
  return facts;
}

Result<bool> break_lock(Storage& storage, std::string_view key, const LockFacts& judged) {
  if (!judged.stale()) return false;
  return storage.change_if_unchanged(key, {judged.bytes, judged.modified}, std::nullopt);
}

struct Lock::State {
  std::shared_ptr<Storage> storage;
  std::string key;
  LockRecord record;
  std::chrono::seconds ttl{0};
  std::mutex mutex; // record and storage_: one request at a time from the owner and the keeper
  // The keeper.
  std::mutex keeper_mutex;
  std::condition_variable wake;
  bool stop = false;
  std::thread keeper;

  // With `mutex` held. Replaced only while it is still the record we
  // wrote: a lock broken meanwhile is not brought back.
  Status renew(Time now) {
    LockRecord renewed = record;
    renewed.expires_unix = unix_seconds(now + ttl);
    auto replaced = storage->change_if_unchanged(key, {record.serialize(), std::nullopt}, renewed.serialize());
    if (!replaced) return fail(replaced.error());
    if (*replaced) {
      record = std::move(renewed);
      return ok_status();
    }
    auto text = read_if_there(*storage, key);
    auto found = text && *text ? LockRecord::parse(**text) : std::nullopt;
    std::string holder;
    if (found) holder = found->holder() ? found->holder()->describe() : "'" + found->owner + "'";
    return fail("the lock " + storage->describe(key) + " is no longer ours" +
                (found ? " (held by " + holder + ")" : std::string()));
  }

  void stop_keeper() {
    if (!keeper.joinable()) return;
    {
      std::lock_guard guard(keeper_mutex);
      stop = true;
    }
    wake.notify_all();
    keeper.join();
  }
};

Lock::Lock() = default;
Lock::Lock(std::unique_ptr<State> state) : state_(std::move(state)) {}
Lock::Lock(Lock&& other) noexcept = default;
Lock& Lock::operator=(Lock&& other) noexcept {
  if (this != &other) {
    std::ignore = release();
    state_ = std::move(other.state_);
  }
  return *this;
}
Lock::~Lock() { std::ignore = release(); }

bool Lock::held() const { return state_ && state_->storage; }

LockRecord Lock::record() const {
  if (!state_) return {};
  std::lock_guard guard(state_->mutex);
  return state_->record;
}

Result<Lock::TakenOrHeld> Lock::try_acquire(std::shared_ptr<Storage> storage, std::string key,
                                            const util::LockHolder& me, LockTimes times, Time now, Racers racers) {
  LockRecord mine{me.serialize(), util::unique_suffix(), unix_seconds(now + times.ttl)};
  const std::string bytes = mine.serialize();
  auto taken = [&] {
    auto state = std::make_unique<State>();
    state->storage = std::move(storage);
    state->key = std::move(key);
    state->record = std::move(mine);
    state->ttl = times.ttl;
    return TakenOrHeld(Lock(std::move(state)));
  };
  auto ours_now = [&]() -> Result<bool> {
    auto text = read_if_there(*storage, key);
    if (!text) return fail(text.error());
    auto found = *text ? LockRecord::parse(**text) : std::nullopt;
    return found && found->token == mine.token;
  };
  // Where exclusive create (or replacement) is not exact, a racer whose look
  // came before our write was visible sends its own within about the time
  // ours took, and the last one stays: ours only if still there after that.
  auto still_ours_after = [&](std::chrono::steady_clock::time_point started) -> Result<bool> {
    auto settle = std::clamp<std::chrono::steady_clock::duration>(2 * (std::chrono::steady_clock::now() - started),
                                                                  kLockSettleMin, kLockSettleMax);
    std::this_thread::sleep_for(settle);
    return ours_now();
  };
  LockFacts facts;
  // Two rounds: the second follows the breaking of a stale lock.
  for (int round = 0; round < 2; ++round) {
    const auto started = std::chrono::steady_clock::now();
    auto created = storage->write(key, bytes, IfPresent::keep);
    if (!created) return fail(created.error());
    if (*created && (storage->exclusive_create_is_exact() || racers == Racers::none)) return taken();
    std::optional<LockFacts> judged;
    bool ours = *created;
    if (!ours) {
      auto found = judge_lock(*storage, key, times.stale_age, now);
      if (!found) return fail(found.error());
      judged = std::move(*found);
      // A create whose response was lost and whose retry found our own record.
      ours = judged->record && judged->record->token == mine.token;
    }
    if (ours) {
      auto still = still_ours_after(started);
      if (!still) return fail(still.error());
      if (*still) return taken();
      judged.reset();
    }
    if (!judged) {
      auto found = judge_lock(*storage, key, times.stale_age, now);
      if (!found) return fail(found.error());
      judged = std::move(*found);
    }
    facts = std::move(*judged);
    if (facts.state == LockState::absent) continue; // released meanwhile
    if (facts.blocks()) return TakenOrHeld(Held{std::move(facts)});
    if (facts.record && !facts.record->token.empty()) {
      // A record of ours names its taking: replaced by this one while it
      // is still that record (on S3 a PUT If-Match its ETag), of several
      // launchers that judged it stale at once one takes it over. Removed
      // and created again instead, a taker slow between its look and its
      // removal could remove the lock another had just created, and both
      // would compile the graph.
      spdlog::info("taking over the stale lock {} ({}; {})", storage->describe(key), facts.describe(),
                   to_string(facts.state));
      const auto started = std::chrono::steady_clock::now();
      auto replaced = storage->change_if_unchanged(key, {facts.bytes, std::nullopt}, bytes);
      if (!replaced) return fail(replaced.error());
      if (!*replaced) continue; // another took it over, or let it go: judged again
      if (storage->exclusive_create_is_exact()) return taken();
      auto still = still_ours_after(started);
      if (!still) return fail(still.error());
      if (*still) return taken();
      continue;
    }
    // The framework's lock, or an older release's: no record to replace by.
    spdlog::info("removing the stale lock {} ({}; {})", storage->describe(key), facts.describe(),
                 to_string(facts.state));
    if (auto broken = break_lock(*storage, key, facts); !broken) return fail(broken.error());
  }
  // Taken again by another process while we broke a stale one.
  auto judged = judge_lock(*storage, key, times.stale_age, now);
  if (!judged) return fail(judged.error());
  return TakenOrHeld(Held{std::move(*judged)});
}

Result<std::optional<Lock>> Lock::try_create(std::shared_ptr<Storage> storage, std::string key,
                                             const util::LockHolder& me, LockTimes times, Time now) {
  if (!storage->exclusive_create_is_exact()) {
    auto got = try_acquire(std::move(storage), std::move(key), me, times, now);
    if (!got) return fail(got.error());
    if (auto* taken = std::get_if<Lock>(&*got)) return std::optional<Lock>(std::move(*taken));
    return std::optional<Lock>{};
  }
  LockRecord mine{me.serialize(), util::unique_suffix(), unix_seconds(now + times.ttl)};
  auto created = storage->write(key, mine.serialize(), IfPresent::keep);
  if (!created) return fail(created.error());
  if (!*created) return std::optional<Lock>{};
  auto state = std::make_unique<State>();
  state->storage = std::move(storage);
  state->key = std::move(key);
  state->record = std::move(mine);
  state->ttl = times.ttl;
  return std::optional<Lock>(Lock(std::move(state)));
}

Status Lock::renew(Time now) {
  if (!held()) return fail("the lock was released");
  std::lock_guard guard(state_->mutex);
  return state_->renew(now);
}

bool Lock::lease_lapsed(Time now) const {
  if (!held()) return true;
  std::lock_guard guard(state_->mutex);
  return state_->record.expires_unix <= unix_seconds(now);
}

void Lock::keep_renewed() {
  if (held()) keep_renewed(std::chrono::duration_cast<std::chrono::milliseconds>(state_->ttl) / 3);
}

void Lock::keep_renewed(std::chrono::milliseconds period) {
  if (!held() || state_->keeper.joinable()) return;
  // The thread sees the state, which outlives moves of the Lock.
  state_->keeper = util::thread_without_signals([state = state_.get(), period] {
    std::unique_lock guard(state->keeper_mutex);
    // After a renewal that failed (a request that timed out, a throttled
    // store), the next comes sooner: 1 s, then twice as long each time, up
    // to the period, so that one fault near the end of the lease does not
    // let it lapse.
    std::chrono::milliseconds wait = period;
    while (!state->wake.wait_for(guard, wait, [state] { return state->stop; })) {
      guard.unlock();
      {
        std::lock_guard request(state->mutex);
        if (auto s = state->renew(std::chrono::system_clock::now()); !s) {
          wait = wait == period ? std::min(period, std::chrono::milliseconds(1000)) : std::min(period, 2 * wait);
          spdlog::warn("cannot renew a lock: {} (tried again in {} ms)", s.error(), wait.count());
        } else {
          wait = period;
        }
      }
      guard.lock();
    }
  });
}

Status Lock::release() {
  if (!held()) return ok_status();
  state_->stop_keeper();
  std::lock_guard guard(state_->mutex);
  auto storage = std::move(state_->storage);
  state_->storage.reset();
  // Only while it is still our record: a successor's lock stays.
  auto removed = storage->change_if_unchanged(state_->key, {state_->record.serialize(), std::nullopt}, std::nullopt);
  if (!removed) return fail(removed.error());
  return ok_status();
}

} // namespace npc::storage
