#pragma once
// Where a cache's files live. A cache entry (cache/entry.hpp) reads and
// writes its files through this interface only for what every backend can
// do: list, stat, read (into memory or a local file), write (bytes or a
// local file; replacing or create-only), change a file only while it is as
// read, remove a file or a folder, and set a folder's time. The local
// directory is one backend (local.hpp); an object store is another.
//
// Keys are '/'-separated paths relative to the storage's root
// ("neuronxcc-2.15.128.0/MODULE_1+abcd/model.neff"); "" is the root.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
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
  // The record of its folder's time (Storage::set_folder_time), where the
  // storage keeps one as a file: `modified` is then that folder's time.
  bool folder_time = false;
};

// What connections to one store learn about it, shared by every connection
// opened with it (storage/open.hpp): one connection asks, all know.
struct Learned {
  // Whether the server lets exactly one of racing create-only writes win.
  std::atomic<bool> exclusive_create_exact{false};
};

// What a write puts at its key: bytes, or a local file that is moved there
// (streamed: a NEFF can be hundreds of MiB). Bytes are borrowed for the
// call; the file's path is held.
class Body {
public:
  Body(std::string_view bytes) : bytes_(bytes) {}
  Body(const char* bytes) : bytes_(bytes) {}
  Body(const std::string& bytes) : bytes_(bytes) {}
  [[nodiscard]] static Body file(std::filesystem::path local) {
    Body body{std::string_view{}};
    body.file_ = std::move(local);
    return body;
  }

  // The local file, or nullptr when the body is bytes.
  [[nodiscard]] const std::filesystem::path* file() const { return file_ ? &*file_ : nullptr; }
  [[nodiscard]] std::string_view bytes() const { return bytes_; }

private:
  std::string_view bytes_;
  std::optional<std::filesystem::path> file_;
};

// Where a read puts what it reads: into memory, failing past a size, or
// into a local file, written under a temp name and renamed so that nothing
// partial is ever at its path.
class Into {
public:
  [[nodiscard]] static Into memory(std::string& bytes, std::uint64_t max_bytes) {
    Into into;
    into.bytes_ = &bytes;
    into.max_bytes_ = max_bytes;
    return into;
  }
  [[nodiscard]] static Into file(std::filesystem::path local) {
    Into into;
    into.file_ = std::move(local);
    return into;
  }

  // The string to fill, or nullptr when the read goes into a file.
  [[nodiscard]] std::string* memory() const { return bytes_; }
  [[nodiscard]] std::uint64_t max_bytes() const { return max_bytes_; }
  // The local file, or nullptr when the read goes into memory.
  [[nodiscard]] const std::filesystem::path* file() const { return file_ ? &*file_ : nullptr; }

private:
  Into() = default;
  std::string* bytes_ = nullptr;
  std::uint64_t max_bytes_ = 0;
  std::optional<std::filesystem::path> file_;
};

// What a write does when something is already at its key.
enum class IfPresent {
  replace, // the new content takes its place
  keep     // it stays, and the write reports false
};

// What a conditional change (Storage::change_if_unchanged) compares a key
// against: the bytes read from it (a folder where a file was expected reads
// as empty) and, when known, its time as stat gave it.
struct Seen {
  std::string_view bytes;
  std::optional<Time> modified;
};

// The primitives every backend implements; what a cache does with them
// (entries, last use, locks, eviction) is built above, in cache/ and in
// lock.hpp.
class Storage {
public:
  // `where` names the root as users name it (a path, or a URL); what
  // connections to this store learned of it is shared through `learned`.
  Storage(std::string where, std::shared_ptr<Learned> learned)
      : where_(std::move(where)), learned_(std::move(learned)) {}
  virtual ~Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // Where `key` is, as users name it; "" is the root.
  [[nodiscard]] std::string describe(std::string_view key = {}) const;
  [[nodiscard]] const std::shared_ptr<Learned>& learned() const { return learned_; }

  // Whether a write with IfPresent::keep lets exactly one of racing
  // creators win everywhere it runs. An object store cannot promise it
  // (some S3-compatible servers ignore the condition) until probe() has
  // found that this server does.
  [[nodiscard]] bool exclusive_create_is_exact() const { return learned_->exclusive_create_exact; }

  // The names directly under `dir`; an absent folder has none.
  [[nodiscard]] virtual Result<std::vector<std::string>> list(std::string_view dir) const = 0;
  // Every file below `dir` at any depth, with its size and time, in one
  // walk: what a whole-cache listing needs without a request per entry (S3:
  // one LIST per 1000 objects). Sorted by key; an absent folder has none.
  [[nodiscard]] virtual Result<std::vector<TreeFile>> list_tree(std::string_view dir) const = 0;
  // Nothing when absent.
  [[nodiscard]] virtual Result<std::optional<ObjectInfo>> stat(std::string_view key) const = 0;
  // Reads the whole of `key` where `into` says: false when absent.
  [[nodiscard]] virtual Result<bool> read(std::string_view key, const Into& into) const = 0;
  // The whole content in memory; fails when absent or past max_bytes.
  [[nodiscard]] Result<std::string> read(std::string_view key, std::uint64_t max_bytes) const;

  // Writes `body` at `key`: readers see the old content or the new one,
  // never a part. With IfPresent::keep it writes only when nothing is at
  // `key` (false then, and what is there stays); of many processes racing,
  // exactly one gets true where exclusive_create_is_exact(). A local file
  // is gone once placed, or refused by keep.
  [[nodiscard]] virtual Result<bool> write(std::string_view key, const Body& body, IfPresent if_present) = 0;

  // Whether the storage answers, with these credentials, at its root, in
  // one cheap request (S3: a LIST of at most one key under the prefix),
  // before work that needs it; a directory is checked where it is made.
  // Where what create-only writes promise depends on the server (S3:
  // whether it honours If-None-Match), a usable storage is also asked that,
  // with a few requests more: exclusive_create_is_exact() says so
  // afterwards, on this connection and on every one sharing its Learned.
  // An error there leaves the cautious answer, and the storage usable.
  [[nodiscard]] virtual Probe probe() const { return {}; }

  // Removes one file; an absent one is fine.
  [[nodiscard]] virtual Status remove(std::string_view key) = 0;
  // Replaces `key` with `replacement`, or removes it when there is none,
  // only while it is still what was `seen`: false, and the object left as
  // it is, when it changed or is gone. What breaks, takes over and renews a
  // lock: a lock taken again meanwhile stays. Exact among processes of one
  // host on a directory; on an object store a removal is a look and a
  // DELETE (a replacement is one PUT If-Match where the server honours it).
  [[nodiscard]] virtual Result<bool> change_if_unchanged(std::string_view key, const Seen& seen,
                                                         std::optional<std::string_view> replacement) = 0;
  // Removes a folder and all below it: false when it was absent. A
  // directory makes it vanish at once (one rename); an object store removes
  // one object at a time, so a reader meanwhile may see part of it. What
  // must go first for readers goes by remove() before (cache/publish.hpp).
  [[nodiscard]] virtual Result<bool> remove_tree(std::string_view dir) = 0;

  // Sets the time of folder `dir` to `when` (a cache keeps an entry's last
  // use there). A directory keeps it as the folder's own time, which stat
  // gives. An object store, whose folders have no time, writes a record in
  // the folder, which list_tree lists flagged TreeFile::folder_time, at the
  // time it was written.
  [[nodiscard]] virtual Status set_folder_time(std::string_view dir, Time when) = 0;

private:
  std::string where_;
  std::shared_ptr<Learned> learned_;
};

} // namespace npc::storage
