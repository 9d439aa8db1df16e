// The directory graphs and NEFFs go to: the one given with --workdir (kept),
// or a fresh one under $TMPDIR (or /tmp) that is removed at the end.
#pragma once

#include <optional>
#include <string>

namespace standin::train {

class Workdir {
 public:
  // Throws failure() if the directory cannot be created.
  explicit Workdir(const std::optional<std::string>& requested);
  ~Workdir();
  Workdir(const Workdir&) = delete;
  Workdir& operator=(const Workdir&) = delete;

  const std::string& path() const { return path_; }
  bool is_temporary() const { return temporary_; }

 private:
  std::string path_;
  bool temporary_ = false;
};

}  // namespace standin::train
