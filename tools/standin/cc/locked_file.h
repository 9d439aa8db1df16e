// A small state file read and rewritten under an exclusive flock, so many
// compiler processes started at once update it one at a time.
#pragma once

#include <string>

namespace standin::cc {

class LockedFile {
 public:
  // Opens (creating if needed) and locks `path`; blocks while another
  // process holds the lock. Throws failure() naming `what` on error.
  LockedFile(const std::string& path, const std::string& what);
  ~LockedFile();  // closing the descriptor releases the lock
  LockedFile(const LockedFile&) = delete;
  LockedFile& operator=(const LockedFile&) = delete;

  std::string read_all();
  void replace(const std::string& contents);

 private:
  std::string path_;
  std::string what_;
  int fd_ = -1;
};

}  // namespace standin::cc
