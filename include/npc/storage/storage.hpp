#pragma once
// Where a cache's files live. A cache entry (cache/entry.hpp) reads and
// writes its files through this interface only for what every backend can
// do: list, stat, read, write atomically, create exclusively, place a local
// file, remove, and keep an entry's last use. The local directory is one
// backend (local.hpp); an object store is another.
//
// Keys are '/'-separated paths relative to the storage's root
// ("neuronxcc-2.15.128.0/MODULE_1+abcd/model.neff"); "" is the root.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <npc/util/result.hpp>

namespace npc::storage {

using Time = std::chrono::system_clock::time_point;

struct ObjectInfo {
  std::uint64_t size = 0;
  Time modified;
  bool directory = false;
};

// Whether a storage can be used at all, as one cheap request finds it
// (Storage::probe): what a program that is about to start long work on it
// checks first, and names in words when it cannot.
enum class Reach {
  usable,
  credentials_refused, // the keys are wrong (not a missing permission)
  access_denied,       // the keys are right, but may not list here
  missing,             // the bucket (or root) named does not exist
  unreachable,         // no answer from where the storage is (endpoint, network)
  failed               // another refusal (a server error after its retries)
};

struct Probe {
  Reach reach = Reach::usable;
  std::string detail; // the request's one-line error; empty when usable
};

// A file found by Storage::list_tree.
struct TreeFile {
  std::string key; // relative to the folder listed: "MODULE_1+abcd/model.neff"
  std::uint64_t size = 0;
  Time modified;
};

class Storage {
public:
  virtual ~Storage() = default;

  // The root, as users name it (a path, or a URL), for messages.
  [[nodiscard]] virtual std::string describe() const = 0;
  // Where `key` is, as users name it.
  [[nodiscard]] virtual std::string describe(std::string_view key) const = 0;

  // The names directly under `dir`; an absent folder has none.
  [[nodiscard]] virtual Result<std::vector<std::string>> list(std::string_view dir) const = 0;
  // Every file below `dir` at any depth, with its size and time, in one
  // walk: what a whole-cache listing needs without a request per entry (S3:
  // one LIST per 1000 objects). Sorted by key; an absent folder has none.
  [[nodiscard]] virtual Result<std::vector<TreeFile>> list_tree(std::string_view dir) const = 0;
  // Nothing when absent.
  [[nodiscard]] virtual Result<std::optional<ObjectInfo>> stat(std::string_view key) const = 0;
  // The whole content; fails past max_bytes.
  [[nodiscard]] virtual Result<std::string> read(std::string_view key, std::uint64_t max_bytes) const = 0;
  // Copies `key` to the local file `local`, written under a temp name and
  // renamed, so nothing partial is ever at `local`: false when absent.
  [[nodiscard]] virtual Result<bool> get_file(std::string_view key, const std::filesystem::path& local) const = 0;

  // Readers see the old content or the new one, never a part.
  [[nodiscard]] virtual Status write_atomic(std::string_view key, std::string_view bytes) = 0;
  // Writes only when nothing is at `key`: false when something was (it is
  // left as it is). Of many processes racing, exactly one gets true.
  [[nodiscard]] virtual Result<bool> create_exclusive(std::string_view key, std::string_view bytes) = 0;
  // Moves a local file to `key` (replacing what is there), atomically for
  // readers; the local file is gone afterwards.
  [[nodiscard]] virtual Status put_file(const std::filesystem::path& local, std::string_view key) = 0;
  // As put_file, but when something is already at `key` it stays and the
  // local file is removed: false then.
  [[nodiscard]] virtual Result<bool> put_file_if_absent(const std::filesystem::path& local, std::string_view key) = 0;

  // Whether create_exclusive lets exactly one of racing creators win
  // everywhere it runs. An object store cannot promise it: some
  // S3-compatible servers ignore the condition.
  [[nodiscard]] virtual bool exclusive_create_is_exact() const = 0;
  // Finds out whether this server lets exactly one of racing creators win,
  // where that depends on the server (S3: whether it honours If-None-Match),
  // with a few requests; exclusive_create_is_exact() says so afterwards.
  // What an error leaves is the cautious answer.
  [[nodiscard]] virtual Result<bool> learn_exclusive_create() { return exclusive_create_is_exact(); }
  // What learn_exclusive_create found on `learned`, another connection to
  // the same server, without asking the server again.
  virtual void learn_exclusive_create_from(const Storage& learned) { (void)learned; }

  // Whether the storage answers, with these credentials, at its root, in
  // one cheap request (S3: a LIST of at most one key under the prefix),
  // before work that needs it. A directory is checked where it is made.
  [[nodiscard]] virtual Probe probe() const { return {}; }

  // Removes one file; an absent one is fine.
  [[nodiscard]] virtual Status remove(std::string_view key) = 0;
  // Removes `key` only while it is still what was read: `bytes`, and
  // `modified` as stat gave it when given (a folder where a file was
  // expected reads as empty). False, and the object left as it is, when it
  // changed or is gone. What breaks a stale lock: a lock taken again
  // meanwhile stays. Exact among processes of one host on a directory; on
  // an object store, and across hosts, the look and the removal are two
  // steps.
  [[nodiscard]] virtual Result<bool> remove_if_unchanged(std::string_view key, std::string_view bytes,
                                                         std::optional<Time> modified) = 0;
  // Replaces `key` with `replacement` only while it still holds `bytes`, as
  // remove_if_unchanged: false when it changed or is gone. What renews a lock.
  [[nodiscard]] virtual Result<bool> replace_if_unchanged(std::string_view key, std::string_view bytes,
                                                          std::string_view replacement) = 0;
  // Removes a folder and all below it, so that readers see all of it or
  // none; false when it was absent. Where a folder cannot vanish at once
  // (an object store removes one object at a time), `first_file` (a name
  // directly in `dir`; empty for none) goes before the rest, so a reader
  // that trusts it never takes the folder while its other files go.
  [[nodiscard]] virtual Result<bool> remove_tree(std::string_view dir, std::string_view first_file) = 0;

  // When an entry (a folder) was last used; eviction takes the oldest.
  [[nodiscard]] virtual Result<Time> last_use(std::string_view dir) const = 0;
  [[nodiscard]] virtual Status set_last_use(std::string_view dir, Time when) = 0;
  // The file in a folder that records its last use, for a backend that
  // cannot set a folder's time (its time in a listing is the use); empty
  // when the folder's own time is kept.
  [[nodiscard]] virtual std::string_view last_use_file() const = 0;
};

} // namespace npc::storage
