#pragma once
// Which launcher of a roll owns a graph: rendezvous hashing. Each launcher
// ranks the graph by a hash of its name and the graph's key, and the first
// ranked owns it. Launchers that see the same roll agree on every graph
// without a word, and one that joins or leaves moves only its own share.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace npc::cluster {

// The index in `members` of the owner of the graph `key` (0 when there are
// none). The hash is the same in every process and build.
[[nodiscard]] std::size_t share_owner(std::string_view key, const std::vector<std::string>& members);

} // namespace npc::cluster
