#pragma once
// The storage backend of a cache in a local (or network-mounted) directory.
// Atomicity comes from rename(2) within one filesystem, exclusive creation
// from link(2), and a removed folder is first renamed into a trash folder so
// that readers see all of it or none.

#include <filesystem>

#include <npc/storage/storage.hpp>

namespace npc::storage {

class LocalStorage final : public Storage {
public:
  // `trash` receives removed folders before they are deleted; it should be on
  // the same filesystem as `root` (elsewhere a folder is deleted in place).
  LocalStorage(std::filesystem::path root, std::filesystem::path trash);

  [[nodiscard]] const std::filesystem::path& root() const { return root_; }
  // The local path of `key`.
  [[nodiscard]] std::filesystem::path path(std::string_view key) const;

  [[nodiscard]] Result<std::vector<std::string>> list(std::string_view dir) const override;
  [[nodiscard]] Result<std::vector<TreeFile>> list_tree(std::string_view dir) const override;
  [[nodiscard]] Result<std::optional<ObjectInfo>> stat(std::string_view key) const override;
  using Storage::read;
  [[nodiscard]] Result<bool> read(std::string_view key, const Into& into) const override;
  [[nodiscard]] Result<bool> write(std::string_view key, const Body& body, IfPresent if_present) override;
  [[nodiscard]] Status remove(std::string_view key) override;
  [[nodiscard]] Result<bool> change_if_unchanged(std::string_view key, const Seen& seen,
                                                 std::optional<std::string_view> replacement) override;
  [[nodiscard]] Result<bool> remove_tree(std::string_view dir) override;
  [[nodiscard]] Status set_folder_time(std::string_view dir, Time when) override;

private:
  [[nodiscard]] Result<bool> write_bytes(std::string_view key, std::string_view bytes, IfPresent if_present);
  // A local file linked (create-only) or renamed into place.
  [[nodiscard]] Result<bool> place_file(const std::filesystem::path& local, std::string_view key,
                                        IfPresent if_present);

  std::filesystem::path root_;
  std::filesystem::path trash_;
};

} // namespace npc::storage
