#pragma once
// A storage that passes every call to another one: a test derives from it
// and overrides only the calls it watches or breaks (records the order of
// writes, refuses a lock), so the rest behaves as the real backend.

#include <memory>
#include <utility>

#include <npc/storage/storage.hpp>

namespace npc::test {

class ForwardingStorage : public storage::Storage {
public:
  explicit ForwardingStorage(std::shared_ptr<storage::Storage> inner) : inner_(std::move(inner)) {}

  std::string describe(std::string_view key) const override { return inner_->describe(key); }
  Result<std::vector<std::string>> list(std::string_view dir) const override { return inner_->list(dir); }
  Result<std::vector<storage::TreeFile>> list_tree(std::string_view dir) const override {
    return inner_->list_tree(dir);
  }
  Result<std::optional<storage::ObjectInfo>> stat(std::string_view key) const override { return inner_->stat(key); }
  Result<std::string> read(std::string_view key, std::uint64_t max) const override { return inner_->read(key, max); }
  Result<bool> get_file(std::string_view key, const std::filesystem::path& local) const override {
    return inner_->get_file(key, local);
  }
  Result<bool> write(std::string_view key, std::string_view bytes, storage::IfPresent if_present) override {
    return inner_->write(key, bytes, if_present);
  }
  Result<bool> put_file(const std::filesystem::path& local, std::string_view key,
                        storage::IfPresent if_present) override {
    return inner_->put_file(local, key, if_present);
  }
  bool exclusive_create_is_exact() const override { return inner_->exclusive_create_is_exact(); }
  Status remove(std::string_view key) override { return inner_->remove(key); }
  Result<bool> change_if_unchanged(std::string_view key, const storage::Seen& seen,
                                   std::optional<std::string_view> replacement) override {
    return inner_->change_if_unchanged(key, seen, replacement);
  }
  Result<bool> remove_tree(std::string_view dir) override { return inner_->remove_tree(dir); }
  Status set_folder_time(std::string_view dir, storage::Time when) override {
    return inner_->set_folder_time(dir, when);
  }

private:
  std::shared_ptr<storage::Storage> inner_;
};

} // namespace npc::test
