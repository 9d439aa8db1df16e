#include <npc/cache/remote_lock.hpp>

#include <condition_variable>
#include <csignal>
#include <pthread.h>
#include <algorithm>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <npc/cache/layout.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/strings.hpp>

namespace npc::cache {

namespace {

using nlohmann::json;

// A record is a few hundred bytes; anything much bigger is not one.
constexpr std::uint64_t kMaxLockRecordBytes = 64 * 1024;

std::int64_t unix_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

// The holder is a process of this host and boot that is gone: as for a
// local lock (file_lock.hpp), a lock of another host is judged by its
// expiry alone.
bool held_by_dead_process(const RemoteLockRecord& record) {
  auto holder = util::LockHolder::parse(record.owner);
  return holder && util::liveness(*holder) == util::Liveness::dead;
}

} // namespace

std::string RemoteLockRecord::serialize() const {
  return json{{"owner", owner}, {"token", token}, {"expires", expires_unix}}.dump() + "\n";
}

std::optional<RemoteLockRecord> RemoteLockRecord::parse(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto owner = j.find("owner");
  auto token = j.find("token");
  auto expires = j.find("expires");
  if (owner == j.end() || !owner->is_string() || token == j.end() || !token->is_string() || token->empty() ||
      expires == j.end() || !expires->is_number_integer())
    return std::nullopt;
  return RemoteLockRecord{owner->get<std::string>(), token->get<std::string>(), expires->get<std::int64_t>()};
}

std::string RemoteLockRecord::describe() const {
  auto holder = util::LockHolder::parse(owner);
  return (holder ? holder->describe() : "'" + owner + "'") + ", until " + util::format_utc(std::chrono::system_clock::time_point(std::chrono::seconds(expires_unix)));
}

bool RemoteLockRecord::in_force(std::chrono::system_clock::time_point now) const {
  return expires_unix > unix_seconds(now) && !held_by_dead_process(*this);
}

Result<std::optional<RemoteLockRecord>> RemoteLock::read(const storage::Storage& storage,
                                                         std::string_view entry_key) {
  const std::string key = std::string(entry_key) + "/" + std::string(kFrameworkLockFile);
  auto text = storage.read(key, kMaxLockRecordBytes);
  if (!text) {
    auto there = storage.stat(key);
    if (there && !*there) return std::optional<RemoteLockRecord>{}; // released meanwhile
    return fail(text.error());
  }
  return std::optional<RemoteLockRecord>(RemoteLockRecord::parse(*text).value_or(RemoteLockRecord{}));
}

Result<bool> RemoteLock::held(const storage::Storage& storage, std::string_view entry_key,
                              std::chrono::system_clock::time_point now) {
  auto found = read(storage, entry_key);
  if (!found) return fail(found.error());
  return *found && (*found)->in_force(now);
}

Result<RemoteLock::TakenOrHeld> RemoteLock::try_acquire(std::shared_ptr<storage::Storage> storage,
                                                        std::string entry_key, const util::LockHolder& me,
                                                        std::chrono::seconds ttl,
                                                        std::chrono::system_clock::time_point now) {
  const std::string key = entry_key + "/" + std::string(kFrameworkLockFile);
  RemoteLockRecord mine{me.serialize(), util::unique_suffix(), unix_seconds(now + ttl)};
  // Two rounds: the second follows the removal of a stale lock.
  // What is at `key` now: nullopt when nothing is (released or judged
  // stale by someone else meanwhile).
  auto look = [&]() -> Result<std::optional<std::optional<RemoteLockRecord>>> {
    auto text = storage->read(key, kMaxLockRecordBytes);
    if (!text) {
      auto there = storage->stat(key);
      if (there && !*there) return std::optional<std::optional<RemoteLockRecord>>{};
      return fail(text.error());
    }
    return std::optional<std::optional<RemoteLockRecord>>(RemoteLockRecord::parse(*text));
  };
  for (int round = 0; round < 2; ++round) {
    const auto started = std::chrono::steady_clock::now();
    auto created = storage->create_exclusive(key, mine.serialize());
    if (!created) return fail(created.error());
    // Read back whether or not we created it (see the header).
    auto seen = look();
    if (!seen) return fail(seen.error());
    if (!*seen) continue; // gone again: the next round decides
    auto found = **seen;
    if (found && found->token == mine.token) {
      // Ours for now. A racer whose HEAD came before our PUT was visible
      // sends its PUT within about the time ours took; where the server
      // ignores If-None-Match, that PUT replaces ours. So look once more
      // after that long: the last writer's token is what stays.
      auto settle = std::clamp<std::chrono::steady_clock::duration>(2 * (std::chrono::steady_clock::now() - started),
                                                                    kRemoteLockSettleMin, kRemoteLockSettleMax);
      std::this_thread::sleep_for(settle);
      auto again = look();
      if (!again) return fail(again.error());
      if (!*again) continue;
      found = **again;
      if (found && found->token == mine.token)
        return TakenOrHeld(RemoteLock(std::move(storage), key, std::move(mine), ttl));
    }
    if (found && found->in_force(now))
      return TakenOrHeld(Held{found->describe()});
    // Stale: its holder stopped renewing it, or is a process of this host
    // that is gone (killed, say: no need to wait for the expiry), or it is
    // not a lock record.
    spdlog::info("removing the stale lock {} ({})", storage->describe(key),
                 found ? "held by " + found->describe() : std::string("not a lock record"));
    if (auto s = storage->remove(key); !s) return fail(s.error());
  }
  return TakenOrHeld(Held{"another process (the lock was taken again while a stale one was removed)"});
}

RemoteLock::~RemoteLock() {
  if (storage_) std::ignore = release();
}

Status RemoteLock::renew(std::chrono::system_clock::time_point now) {
  if (!storage_) return fail("the lock was released");
  auto text = storage_->read(key_, kMaxLockRecordBytes);
  auto found = text ? RemoteLockRecord::parse(*text) : std::nullopt;
  if (!found || found->token != record_.token)
    return fail("the lock " + storage_->describe(key_) + " is no longer ours" +
                (found ? " (held by " + found->describe() + ")" : std::string()));
  RemoteLockRecord renewed = record_;
  renewed.expires_unix = unix_seconds(now + ttl_);
  if (auto s = storage_->write_atomic(key_, renewed.serialize()); !s) return s;
  record_ = std::move(renewed);
  return ok_status();
}

Status RemoteLock::release() {
  if (!storage_) return ok_status();
  auto storage = std::move(storage_);
  storage_.reset();
  auto text = storage->read(key_, kMaxLockRecordBytes);
  if (!text) {
    auto there = storage->stat(key_);
    if (there && !*there) return ok_status(); // already gone
    return fail(text.error());
  }
  auto found = RemoteLockRecord::parse(*text);
  if (!found || found->token != record_.token) return ok_status(); // a successor's: leave it
  return storage->remove(key_);
}

struct RemoteLockKeeper::State {
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::thread thread;
};

RemoteLockKeeper::RemoteLockKeeper(RemoteLock& lock, std::chrono::milliseconds period)
    : state_(std::make_unique<State>()) {
  State* state = state_.get();
  // The thread starts with every signal blocked: a caller that waits for its
  // child with SIGCHLD blocked and read from a signalfd (compile/driver.cpp)
  // would otherwise miss the signals the kernel hands to this thread.
  sigset_t all, before;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &before);
  state->thread = std::thread([state, &lock, period] {
    std::unique_lock guard(state->mutex);
    while (!state->wake.wait_for(guard, period, [state] { return state->stop; })) {
      guard.unlock();
      if (auto s = lock.renew(std::chrono::system_clock::now()); !s)
        spdlog::warn("cannot renew a lock: {}", s.error());
      guard.lock();
    }
  });
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

RemoteLockKeeper::~RemoteLockKeeper() {
  {
    std::lock_guard guard(state_->mutex);
    state_->stop = true;
  }
  state_->wake.notify_all();
  state_->thread.join();
}

} // namespace npc::cache
