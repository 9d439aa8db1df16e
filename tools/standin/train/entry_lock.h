// The framework's existence lock on a cache entry:
// <entry>/model.hlo_module.pb.lock exists while some process compiles the
// entry. Like the real framework, the stand-in writes no owner facts into
// it and takes no flock: whoever finds the file waits until it is gone.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace standin::train {

class EntryLock {
 public:
  // Creates `path` with O_CREAT|O_EXCL, empty. nullopt when it already
  // exists (another process compiles); failure() on any other error.
  static std::optional<EntryLock> try_acquire(const std::string& path);

  // Removes the file, on every way out of the scope a C++ exception can
  // take. A killed process runs no destructor and leaves the lock behind,
  // as a kill -9 of the real framework does.
  ~EntryLock();
  EntryLock(EntryLock&& other) noexcept;
  EntryLock& operator=(EntryLock&&) = delete;
  EntryLock(const EntryLock&) = delete;
  EntryLock& operator=(const EntryLock&) = delete;

 private:
  explicit EntryLock(std::string path) : path_(std::move(path)) {}
  std::string path_;  // "" once moved from
};

// Polls every 50 ms until `path` no longer exists. Throws failure() once
// `deadline` has passed; `timeout_s` is only for the message.
void wait_until_gone(const std::string& path, std::chrono::steady_clock::time_point deadline,
                     double timeout_s);

}  // namespace standin::train
