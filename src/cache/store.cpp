#include <npc/cache/store.hpp>

#include <algorithm>
#include <stdexcept>

#include <npc/cache/layout.hpp>
#include <npc/storage/local.hpp>
#include <npc/util/parallel.hpp>

namespace npc::cache {

namespace {

std::string& tool_name_storage() {
  static std::string name = "npc";
  return name;
}

} // namespace

void set_lock_tool_name(std::string name) { tool_name_storage() = std::move(name); }
const std::string& lock_tool_name() { return tool_name_storage(); }

Cache::Cache(fs::path root, const util::Clock& clock)
    : Cache(std::move(root), trust_mode_from_environment(), clock) {}

Cache::Cache(fs::path root, TrustMode trust, const util::Clock& clock)
    : root_(std::move(root)),
      storage_(std::make_shared<storage::LocalStorage>(root_, root_ / kPrivateDir / kTrashDir)),
      connections_{storage_},
      reading_(&directory_reading()),
      keeping_(&directory_keeping()),
      trust_(trust),
      clock_(clock) {
  if (root_.empty()) throw std::logic_error("a cache directory needs a path");
}

Cache::Cache(std::vector<std::shared_ptr<storage::Storage>> connections, const util::Clock& clock)
    : storage_(connections.empty() ? nullptr : connections.front()),
      connections_(std::move(connections)),
      reading_(&stored_reading()),
      keeping_(&stored_keeping()),
      // Who may write the objects is the store's access control, not modes.
      trust_(TrustMode::trusted),
      clock_(clock) {
  if (!storage_) throw std::logic_error("a cache in a storage needs a connection");
}

fs::path Cache::private_dir() const { return is_directory() ? root_ / kPrivateDir : fs::path(); }

std::string Cache::describe() const { return storage_->describe(); }

std::string Cache::describe(const EntryInfo& entry) const {
  return storage_->describe(entry.key.relative_path().generic_string());
}

Entry Cache::entry(fs::path dir, std::size_t connection) const {
  return Entry(*this, std::move(dir)).through(connections_.at(connection));
}

void Cache::share_out(std::size_t count,
                      const std::function<void(std::size_t connection, std::size_t i)>& work) const {
  if (connections_.size() > 1) {
    util::for_each_shared_out(count, connections_.size(), work);
    return;
  }
  // A thread for every 256 items, up to the machine's: each one's work is a
  // few system calls.
  const std::size_t threads = std::min(util::parallel_threads(), (count + 255) / 256);
  util::for_each_shared_out(count, threads, [&](std::size_t, std::size_t i) { work(0, i); });
}

Status Cache::ensure_root() const { return keeping_->ensure_root(*this); }

void CacheCensus::count(EntryState state, std::uint64_t entry_bytes, util::WallTime last_used) {
  ++entries;
  ++by_state[static_cast<std::size_t>(state)];
  bytes += entry_bytes;
  if (!oldest_use || last_used < *oldest_use) oldest_use = last_used;
  if (!newest_use || last_used > *newest_use) newest_use = last_used;
}

std::vector<EntryInfo> Cache::list() const { return reading_->list(*this); }

std::vector<EntryInfo> Cache::list_version(const std::string& compiler_version) const {
  return reading_->list_version(*this, compiler_version);
}

CacheCensus Cache::census() const { return reading_->census(*this); }

Result<EntryInfo> Cache::look_again(const Entry& entry, const EntryInfo& listed) const {
  return reading_->look_again(*this, entry, listed);
}

void Cache::empty_trash() const { keeping_->empty_trash(*this); }

} // namespace npc::cache
