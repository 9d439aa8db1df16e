#pragma once
// The cache a compile works in: a directory and, for a cache named by URL
// (NEURON_COMPILE_CACHE_URL=s3://...), the shared store behind it, of which
// the directory is this machine's mirror (cache/shared_tier.hpp). The programs
// store, fetch and compile through this one face; it alone knows whether
// there is a second tier.
//
// The shared tier is opened when first needed, never for a hit in the
// directory: a hit pays no client set-up and no credential lookup (which may
// ask the instance metadata service). `before_open` runs first (the static
// wrapper hands the command over to its S3 build there).
//
// A compile there runs in the directory under the shared entry's lock
// (storage/lock.hpp), so that the hosts sharing the cache compile each graph
// once, and its result is pushed there, model.done last. A process that
// finds the shared lock held waits, as for a local lock, looking every few
// seconds whether the holder's result has arrived; when it has, it is
// brought into the directory instead of compiled again. A lock whose holder
// stopped renewing it (a host that died) is taken over once it expires.
// A graph the directory lacks is downloaded under that lock, just before its
// compile (the launcher leaves graphs there until they are compiled).
// The result reaches the shared tier after the directory: when that upload
// fails the compile still counts (the caller has its NEFF), with a warning
// that the shared tier lacks it; the next launcher run uploads it
// (launcher/graph_source.hpp).
//
// When the shared tier cannot be used (unreachable, denied), a compile for a
// training run goes on in the directory alone, with one warning
// (Unusable::compile_here): a cache is an optimisation, as ccache and
// sccache treat remote storage. The launcher's workers, whose job is to fill
// the shared cache, fail loudly instead (Unusable::fail).

#include <chrono>
#include <exception>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <npc/cache/shared_tier.hpp>
#include <npc/cache/store.hpp>
#include <npc/cache/tiers.hpp>
#include <npc/compile/entry_compile.hpp>

namespace npc::compile {

namespace fs = std::filesystem;

// How often a waiter looks at a shared entry whose lock another host holds.
inline constexpr auto kSharedLockPoll = std::chrono::seconds(2);

// Where a compile's result may already be: what CacheTiers::find asks, in
// its order.
struct Lookup {
  cache::CacheKey key;
  // Where an earlier release stored the same compile, when its key differs.
  std::optional<cache::CacheKey> legacy_key;
  // Where the read-only secondary cache is (cache/secondary.hpp), asked only
  // when every tier missed, as naming it may read the environment; may be
  // empty, or give nothing, for none.
  std::function<std::optional<fs::path>()> secondary_root;
  // How long a copy into the directory waits for its entry's lock.
  std::chrono::milliseconds lock_wait{0};
};

// A done entry find() found and the caller took.
struct Found {
  cache::Entry entry;
  // Copied into the directory just now (from the shared tier or the
  // secondary cache): the directory grew, an eviction pass is due.
  bool brought_in = false;
};

class CacheTiers {
public:
  enum class Unusable { compile_here, fail };
  CacheTiers(const cache::Tiers& tiers, Unusable unusable, std::function<void()> before_open = {});

  // Extraction: the graph stored where the framework's would be, the shared
  // tier, and where it is as users name it (its URL); nothing when there is
  // no shared tier (the caller stores it in the directory). Throws
  // EnvironmentError when it cannot be stored.
  [[nodiscard]] std::optional<std::string> store_shared_graph(const cache::CacheKey& key, std::string_view graph,
                                                              const std::vector<std::string>& flags);
  // The lookup order: the first done entry `take` accepts (it delivers the
  // NEFF; false when the NEFF fails its check, and the next place is asked),
  // of
  //  1. the directory's entry of the key (the cache, or the shared tier's mirror);
  //  2. the directory's entry of the earlier release's key;
  //  3. the shared tier's result, brought into the directory
  //     (cache/shared_tier.hpp's fetch_result; a shared tier that cannot be
  //     used is dropped or thrown on, as for a compile);
  //  4. the read-only secondary cache's, copied into the directory.
  // nullopt when none has it (or `take` refused each): a miss.
  [[nodiscard]] std::optional<Found> find(const Lookup& lookup, const std::function<bool(const cache::Entry&)>& take);
  // Compiles the directory's entry of `key` (at `entry_dir`, its graph and
  // flags there): under the shared tier's lock, and pushed there, when there
  // is one (see above).
  [[nodiscard]] EntryCompileResult compile(const cache::CacheKey& key, const fs::path& entry_dir,
                                           const EntryCompileOptions& options);
  // This machine's directory: the cache, or the shared tier's mirror.
  [[nodiscard]] const cache::Cache& directory() const { return tiers_.directory(); }
  // Whether compiles go through the shared tier (named, and usable so far).
  [[nodiscard]] bool compiles_shared() const { return tiers_.shared() && !dropped_; }

private:
  // 3 above: true when the directory's entry is done now.
  [[nodiscard]] bool fetch(const cache::CacheKey& key, std::chrono::milliseconds lock_wait);
  // Runs before_open once, before the shared tier is first opened.
  void prepare();
  // Opens the shared tier once; false when there is none or it was dropped.
  bool open();
  // The shared tier cannot be used: dropped with one warning, or thrown on.
  void unusable(const std::exception& e);

  const cache::Tiers& tiers_;
  Unusable unusable_;
  std::function<void()> before_open_;
  std::optional<cache::SharedTier> shared_;
  bool dropped_ = false;
};

} // namespace npc::compile
