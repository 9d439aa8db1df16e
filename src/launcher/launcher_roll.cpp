#include <npc/launcher/launcher_roll.hpp>

#include <algorithm>
#include <cstdio>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <npc/cache/store.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/random.hpp>
#include <npc/util/signals.hpp>

namespace npc::launcher {

namespace {

constexpr std::string_view kRecordSuffix = ".json";

// A name as an object name: letters, digits, '-', and '_' for the rest.
std::string safe_name(std::string_view text) {
  std::string name(text);
  for (char& c : name)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-')) c = '_';
  return name.empty() ? "host" : name;
}

std::string roll_record_key(const std::string& name) {
  return std::string(kRollFolder) + "/" + name + std::string(kRecordSuffix);
}

std::string roll_record_of(const std::string& name) {
  nlohmann::json record = {{"launcher", name},
                           {"owner", util::LockHolder::self(cache::lock_tool_name()).serialize()},
                           {"renewed_unix", std::chrono::duration_cast<std::chrono::seconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count()}};
  return record.dump();
}

} // namespace

LauncherRoll::LauncherRoll(std::shared_ptr<storage::Storage> storage, std::string self)
    : storage_(std::move(storage)), self_(std::move(self)) {}

Result<std::unique_ptr<LauncherRoll>> LauncherRoll::join(std::shared_ptr<storage::Storage> storage) {
  char word[9];
  std::snprintf(word, sizeof word, "%08x", static_cast<unsigned>(util::random_u64()));
  const std::string name = safe_name(util::this_host()) + "." + std::to_string(::getpid()) + "." + word;
  std::unique_ptr<LauncherRoll> roll(new LauncherRoll(std::move(storage), name));
  const auto now = std::chrono::system_clock::now();
  auto listed = roll->storage_->list_tree(kRollFolder);
  if (!listed) return fail("the launchers' roll at " + roll->storage_->describe(kRollFolder) + ": " + listed.error());
  // Dead launchers' records (killed, or their host lost): no one renews them.
  for (const auto& file : *listed)
    if (now - file.modified > kRollRecordLeftover)
      if (auto s = roll->storage_->remove(std::string(kRollFolder) + "/" + file.key); !s)
        spdlog::debug("a dead launcher's record stays on the roll: {}", s.error());
  if (auto s = roll->storage_->write_atomic(roll_record_key(name), roll_record_of(name)); !s)
    return fail("joining the launchers' roll: " + s.error());
  roll->renewer_ = util::thread_without_signals([r = roll.get()] { r->keep_renewed(); });
  return roll;
}

void LauncherRoll::keep_renewed() {
  const auto period = std::chrono::duration_cast<std::chrono::milliseconds>(kRollRecordLife) / 3;
  std::unique_lock lock(mutex_);
  while (!leaving_) {
    if (stop_.wait_for(lock, period, [this] { return leaving_; })) break;
    lock.unlock();
    {
      std::lock_guard io(io_);
      if (auto s = storage_->write_atomic(roll_record_key(self_), roll_record_of(self_)); !s)
        spdlog::warn("renewing this launcher's place on the roll: {} (tried again in {} s)", s.error(),
                     std::chrono::duration_cast<std::chrono::seconds>(period).count());
    }
    lock.lock();
  }
}

LauncherRoll::~LauncherRoll() {
  {
    std::lock_guard lock(mutex_);
    leaving_ = true;
  }
  stop_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  std::lock_guard io(io_);
  if (auto s = storage_->remove(roll_record_key(self_)); !s)
    spdlog::debug("leaving the launchers' roll: {} (it drops off once unrenewed)", s.error());
}

Result<std::vector<std::string>> LauncherRoll::members(storage::Time now) const {
  std::lock_guard io(io_); // one connection, two threads
  auto listed = storage_->list_tree(kRollFolder);
  if (!listed) return fail(listed.error());
  std::vector<std::string> names{self_};
  for (const auto& file : *listed) {
    const std::string_view key = file.key;
    if (key.size() <= kRecordSuffix.size() || key.find('/') != std::string_view::npos ||
        key.substr(key.size() - kRecordSuffix.size()) != kRecordSuffix)
      continue;
    // Unrenewed for a lifetime, or from a clock far ahead: not a member.
    const auto age = now - file.modified;
    if (age > kRollRecordLife || age < -kRollRecordLife) continue;
    std::string name(key.substr(0, key.size() - kRecordSuffix.size()));
    if (name != self_) names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<std::vector<std::string>> LauncherRoll::changed(double now) {
  if (!first_look_) first_look_ = now;
  else if (now < next_look_) return std::nullopt;
  next_look_ = now + (now - *first_look_ < kRollEarlyForSeconds ? kRollLookEarlySeconds : kRollLookLaterSeconds);
  auto names = members(std::chrono::system_clock::now());
  if (!names) {
    spdlog::debug("the launchers' roll could not be listed: {} (the shares stay as they were)", names.error());
    return std::nullopt;
  }
  if (*names == last_) return std::nullopt;
  last_ = *names;
  return last_;
}

} // namespace npc::launcher
