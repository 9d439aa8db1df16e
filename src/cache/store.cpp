#include <npc/cache/store.hpp>

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <optional>
#include <random>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/cache/layout.hpp>
#include <npc/storage/local.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/parallel.hpp>
#include <npc/util/sha256.hpp>
#include <npc/util/strings.hpp>

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
      trust_(trust),
      clock_(clock) {}

fs::path Cache::private_dir() const { return root_ / kPrivateDir; }

Status Cache::ensure_root() const {
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) {
    if (root_.has_parent_path())
      if (auto s = util::ensure_dir(root_.parent_path(), 0755); !s) return s;
    // The cache holds code that will run on the accelerator: private to the
    // user unless a shared cache is set up on purpose.
    if (::mkdir(root_.c_str(), 0700) != 0) {
      if (errno != EEXIST)
        return fail(util::errno_text("cannot create the cache directory", root_, errno) +
                    " (set --cache_dir in NEURON_CC_FLAGS to a writable place)");
    } else if (::chmod(root_.c_str(), root_mode(trust_)) != 0) { // exact mode, whatever the umask
      return fail(util::errno_text("cannot set the mode of", root_, errno));
    }
  }
  if (!fs::is_directory(root_, ec))
    return fail("the cache path " + root_.string() + " exists and is not a directory");
  if (auto s = check_directory_trust(root_, trust_, "the cache directory"); !s) return s;
  // Below the root, modes follow the umask: the root alone decides who gets in.
  if (auto s = util::ensure_dir(private_dir()); !s) return s;
  return ok_status();
}

std::vector<EntryInfo> Cache::list_version(const std::string& compiler_version) const {
  std::string version_key = std::string(kVersionDirPrefix) + compiler_version;
  fs::path version_dir = root_ / version_key;
  std::vector<std::string> modules;
  for (auto& module : storage_->list(version_key).value_or(std::vector<std::string>{})) {
    std::string g, f;
    if (parse_module_name(module, g, f)) modules.push_back(std::move(module));
  }
  // Each entry costs a directory read and a stat per file, all waiting on
  // the kernel: a big cache (100,000 entries) is read by several threads.
  std::vector<std::optional<EntryInfo>> found(modules.size());
  util::parallel_ranges(modules.size(), 2048, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i)
      if (auto info = Entry(*this, version_dir / modules[i], version_key + "/" + modules[i]).inspect();
          info && info->state != EntryState::absent)
        found[i] = std::move(*info);
  });
  std::vector<EntryInfo> entries;
  entries.reserve(modules.size());
  for (auto& info : found)
    if (info) entries.push_back(std::move(*info));
  return entries;
}

std::vector<EntryInfo> Cache::list() const {
  std::vector<EntryInfo> entries;
  for (const auto& name : storage_->list("").value_or(std::vector<std::string>{})) {
    if (!std::string_view(name).starts_with(kVersionDirPrefix)) continue;
    std::string version = name.substr(kVersionDirPrefix.size());
    if (!valid_compiler_version(version)) continue;
    auto more = list_version(version);
    entries.insert(entries.end(), std::make_move_iterator(more.begin()),
                   std::make_move_iterator(more.end()));
  }
  return entries;
}

void Cache::empty_trash() const {
  fs::path trash = private_dir() / kTrashDir;
  for (const auto& name : util::list_names(trash).value_or(std::vector<std::string>{})) std::ignore = util::remove_tree(trash / name);
}

} // namespace npc::cache
