#pragma once
// --command check: whether the training run will compile anything. The
// trial ran in extraction mode and its graphs were collected (nothing is
// compiled); every graph not done in the cache is one the training run would
// compile, said with why: a cached failure, the same graph compiled under
// other flags or another compiler version (the framework names a graph alike
// under any flags and version, cache/misses.hpp), or nothing of it in the
// cache. What a deploy job runs to prove the real run compiles nothing.
//
// Exit status: 0 when every graph is done; else how many would compile,
// capped as the failed graphs' count is (util/exit_code.hpp).

#include <filesystem>
#include <vector>

#include <npc/cache/store.hpp>

namespace npc::launcher {

namespace fs = std::filesystem;

// `entries`: the collected entry directories of `cache` (its directory, an
// S3 cache's mirror with what the shared tier holds brought in).
[[nodiscard]] int report_warm_check(const std::vector<fs::path>& entries, const cache::Cache& cache);

} // namespace npc::launcher
