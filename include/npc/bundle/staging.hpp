#pragma once
// Staging folders of imports (internal to npc_bundle): each running import
// stages the members it reads under <root>/.npc/import-XXXXXX, which it
// holds locked so that no other import takes the folder for a dead one's.

#include <filesystem>
#include <string_view>

#include <npc/util/file_lock.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/result.hpp>

namespace npc::cache {
class Cache;
}

namespace npc::bundle {

namespace fs = std::filesystem;

inline constexpr std::string_view kImportStagingPrefix = "import-";

// A fresh staging folder, removed with everything in it when this goes.
class ImportStaging {
public:
  // Throws EnvironmentError when the folder cannot be created.
  explicit ImportStaging(const cache::Cache& cache);
  // Takes the folder's lock; fails (with a message naming the folder) when
  // it cannot.
  [[nodiscard]] Status lock();
  [[nodiscard]] const fs::path& path() const { return dir_.path(); }

private:
  util::TempDir dir_;
  util::FileLock lock_; // released before dir_ is removed
};

// Removes staging folders left by imports that died: one whose lock is free
// at once, one that was never locked once older than a few minutes.
void remove_stale_import_staging(const cache::Cache& cache);

} // namespace npc::bundle
