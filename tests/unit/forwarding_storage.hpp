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
  // It names the inner storage's root and shares what it learned.
  explicit ForwardingStorage(std::shared_ptr<storage::Storage> inner)
      : storage::Storage(inner->describe(), inner->learned()), inner_(std::move(inner)) {}

  Result<std::vector<std::string>> list(std::string_view dir) const override { return inner_->list(dir); }
  Result<std::vector<storage::TreeFile>> list_tree(std::string_view dir) const override {
    return inner_->list_tree(dir);
  }
  Result<std::optional<storage::ObjectInfo>> stat(std::string_view key) const override { return inner_->stat(key); }
  using storage::Storage::read;
  Result<bool> read(std::string_view key, const storage::Into& into) const override { return inner_->read(key, into); }
  Result<bool> write(std::string_view key, const storage::Body& body, storage::IfPresent if_present) override {
    return inner_->write(key, body, if_present);
  }
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
