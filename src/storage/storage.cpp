#include <npc/storage/storage.hpp>

namespace npc::storage {

std::string Storage::describe(std::string_view key) const {
  if (key.empty()) return where_;
  // As a path joins a relative one: no second '/' after a root that ends in one.
  if (where_.empty() || where_.back() == '/') return where_ + std::string(key);
  return where_ + "/" + std::string(key);
}

Result<std::string> Storage::read(std::string_view key, std::uint64_t max_bytes) const {
  std::string bytes;
  auto found = read(key, Into::memory(bytes, max_bytes));
  if (!found) return fail(found.error());
  if (!*found) return fail("cannot read " + describe(key) + ": no such file");
  return bytes;
}

} // namespace npc::storage
