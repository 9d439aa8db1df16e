#pragma once
// An entry's NEFF checked where it lies, in a directory: read once, hashed
// against the entry's integrity record (npc-entry.json), and copied on the
// way when asked. What Entry::copy_neff serves from and a directory's
// verification reads (reading_way.hpp).

#include <filesystem>

#include <npc/cache/entry.hpp>
#include <npc/cache/trust.hpp>
#include <npc/util/result.hpp>

namespace npc::cache {

// The entry is checked against `trust` first; `copy_to` is a descriptor the
// NEFF is copied to as it is read (-1: nowhere). A cheap size check comes
// before the read, so a truncated NEFF is caught without reading it.
[[nodiscard]] Result<Integrity> check_neff_in_place(const std::filesystem::path& entry_dir, TrustMode trust,
                                                    int copy_to);

} // namespace npc::cache
