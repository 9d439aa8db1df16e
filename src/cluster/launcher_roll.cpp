#include <npc/cluster/launcher_roll.hpp>

#include <algorithm>
#include <cstdio>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/cache/store.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/random.hpp>

namespace npc::cluster {

namespace {

constexpr std::string_view kRecordSuffix = ".json";

// A name as an object name: letters, digits, '-', and '_' for the rest.
std::string safe_name(std::string_view text) {
  std::string name(text);
  for (char& c : name)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-')) c = '_';
  return name.empty() ? "host" : name;
}

} // namespace

std::string LauncherRoll::record_key(const std::string& name) {
  return std::string(kRollFolder) + "/" + name + std::string(kRecordSuffix);
}

LauncherRoll::LauncherRoll(std::shared_ptr<storage::Storage> storage, std::string self, storage::Lock lease)
    : storage_(std::move(storage)), self_(std::move(self)), lease_(std::move(lease)) {}

Result<std::unique_ptr<LauncherRoll>> LauncherRoll::join(std::shared_ptr<storage::Storage> storage,
                                                         std::shared_ptr<storage::Storage> lease_connection,
                                                         std::optional<std::string> name, std::string_view who) {
  // A name of its own no other launcher can take at once: no settle after
  // creating its record (storage/lock.hpp). A step's task's name can be.
  const auto racers = name ? storage::Lock::Racers::possible : storage::Lock::Racers::none;
  if (!name) {
    char word[9];
    std::snprintf(word, sizeof word, "%08x", static_cast<unsigned>(util::random_u64()));
    name = safe_name(util::this_host()) + "." + std::to_string(::getpid()) + "." + word;
  }
  const auto now = std::chrono::system_clock::now();
  auto listed = storage->list_tree(kRollFolder);
  if (!listed) return fail("the launchers' roll at " + storage->describe(kRollFolder) + ": " + listed.error());
  // Dead launchers' records (killed, or their host lost): no one renews them.
  for (const auto& file : *listed)
    if (now - file.modified > kRollRecordLeftover)
      if (auto s = storage->remove(std::string(kRollFolder) + "/" + file.key); !s)
        spdlog::debug("a dead launcher's record stays on the roll: {}", s.error());
  auto taken = storage::Lock::try_acquire(std::move(lease_connection), record_key(*name),
                                          util::LockHolder::self(cache::lock_tool_name()),
                                          storage::LockTimes{kRollRecordLife, storage::kDefaultStaleLockAge}, now,
                                          racers);
  if (!taken) return fail("joining the launchers' roll: " + taken.error());
  if (auto* held = std::get_if<storage::Lock::Held>(&*taken))
    return fail((who.empty() ? *name : std::string(who)) + " is already running: " + held->facts.describe());
  storage::Lock lease = std::move(std::get<storage::Lock>(*taken));
  lease.keep_renewed();
  return std::unique_ptr<LauncherRoll>(new LauncherRoll(std::move(storage), std::move(*name), std::move(lease)));
}

Result<std::vector<std::string>> LauncherRoll::members(storage::Time now) const {
  auto listed = storage_->list_tree(kRollFolder);
  if (!listed) return fail(listed.error());
  std::vector<std::string> names{self_};
  const std::string this_host_prefix = safe_name(util::this_host()) + ".";
  for (const auto& file : *listed) {
    const std::string_view key = file.key;
    if (key.size() <= kRecordSuffix.size() || key.find('/') != std::string_view::npos ||
        key.substr(key.size() - kRecordSuffix.size()) != kRecordSuffix)
      continue;
    // Unrenewed for a lifetime, or from a clock far ahead: not a member.
    const auto age = now - file.modified;
    if (age > kRollRecordLife || age < -kRollRecordLife) continue;
    std::string name(key.substr(0, key.size() - kRecordSuffix.size()));
    if (name == self_) continue;
    // A launcher of this host that was killed is known gone at once: its
    // record names a pid that runs no more, and goes. Only those are read.
    if (name.starts_with(this_host_prefix))
      if (auto judged = storage::judge_lock(*storage_, record_key(name), storage::kDefaultStaleLockAge, now);
          judged && !judged->blocks()) {
        if (auto removed = storage::break_lock(*storage_, record_key(name), *judged); !removed)
          spdlog::debug("a dead launcher's record stays on the roll: {}", removed.error());
        continue;
      }
    names.push_back(std::move(name));
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

} // namespace npc::cluster
