#pragma once
// Files the user names as outputs (--output, export -o, --report, ...),
// written as shell redirection would: a regular file or a new path is
// published by temp + rename (AtomicFile), so nobody sees half of it; a
// symlink is followed and its target published the same way; a device, FIFO
// or socket that exists is written through (O_WRONLY|O_TRUNC), since a rename
// over /dev/null would replace the device with a file.
//
// Files inside the cache never come here: there a symlink or device is
// hostile and is replaced by AtomicFile, never followed.

#include <filesystem>
#include <optional>
#include <string_view>

#include <npc/util/fs.hpp>
#include <npc/util/result.hpp>

namespace npc::util {

enum class OutputKind {
  replace,      // a regular file or nothing: published by rename at `path`
  write_through // a device, FIFO or socket: opened and written in place
};

struct OutputTarget {
  fs::path path; // replace: the final path, symlinks followed; write_through: as named
  OutputKind kind = OutputKind::replace;
};

// Where a write to `path` lands. Fails on a directory and on a symlink loop.
[[nodiscard]] Result<OutputTarget> resolve_output(const fs::path& path);

// Whether an output could be written at `path` now, without writing it:
// checked before long work (a compile, a whole launcher run) so that a path
// that cannot take the result is found first. A replace-kind output is
// probed by creating and removing a file in its directory.
[[nodiscard]] Status check_output_writable(const fs::path& path);

// Whether files can be created in `dir` now: by creating and removing one.
[[nodiscard]] Status check_directory_writable(const fs::path& dir);

// Where to keep a file made for `path` before it is published there: the
// directory of its final path for a replace-kind output (so that the final
// rename stays on one filesystem), the system's temporary directory for a
// write-through one (/dev is no place for our files).
[[nodiscard]] fs::path staging_dir_for_output(const fs::path& path);

// One user-named output, opened, written and committed like AtomicFile.
// Errors name the path the user gave.
class OutputFile {
public:
  explicit OutputFile(fs::path path, unsigned mode = 0666); // less the umask
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  [[nodiscard]] Status open();
  [[nodiscard]] Status write(std::string_view data);
  // Publishes a replace-kind output; closes a write-through one, checked
  // (a device that lost the data says so there, if not at write()).
  [[nodiscard]] Status commit();
  [[nodiscard]] int fd() const;
  [[nodiscard]] OutputKind kind() const { return kind_; }

private:
  [[nodiscard]] Status said_of_path(Status status) const;

  fs::path path_;
  unsigned mode_;
  OutputKind kind_ = OutputKind::replace;
  std::optional<AtomicFile> atomic_;
  UniqueFd through_;
};

// Whether `path` is the file our stdout writes to (--output /dev/stdout):
// then what we would print there goes to stderr, not into the output.
[[nodiscard]] bool same_file_as_stdout(const fs::path& path);

[[nodiscard]] Status write_output_file(const fs::path& path, std::string_view data, unsigned mode = 0666);

// Puts the finished regular file `source` at the user's `output`: renamed
// when the output is replace-kind on the same filesystem, else copied
// through an OutputFile and removed.
[[nodiscard]] Status publish_output_from(const fs::path& source, const fs::path& output);

} // namespace npc::util
