#pragma once
// What a look at a pending graph's entry found, wherever it looked: this
// host's directory (the launcher's pool, launcher/pool.hpp) or the tier the
// hosts share (SharedTier::look). One answer for both, so the launcher
// passes a shared look on as it came.

namespace npc::cache {

enum class Found {
  done,           // its result is here now (for a shared look: in the mirror,
                  // or, not downloaded, in the shared tier)
  failed,         // its cached failure is here now
  pending,        // none of these: a compile here takes the lock
  locked,         // a process of this host holds the entry's lock
  held_elsewhere, // another host holds its lock in the tier they share, alive
                  // (a lock this host's directory does not show)
  removed         // the entry is gone (neuron_cache rm, --command clean);
                  // never the answer of a shared look
};

} // namespace npc::cache
