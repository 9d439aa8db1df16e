#pragma once
// The on-disk layout torch-neuronx reads and writes:
//   <root>/neuronxcc-<compiler version>/MODULE_<graph hash>+<flags hash>/
// with the files named below. Files we add for our own use start with "npc-"
// or live under <root>/.npc, which torch-neuronx ignores.

#include <string_view>

namespace npc::cache {

inline constexpr std::string_view kVersionDirPrefix = "neuronxcc-";
inline constexpr std::string_view kModulePrefix = "MODULE_";

inline constexpr std::string_view kGraphFile = "model.hlo_module.pb";
inline constexpr std::string_view kFlagsFile = "compile_flags.json";
inline constexpr std::string_view kNeffFile = "model.neff";
// model.done, the marker a result is trusted by, belongs to the protocol
// that writes it last and removes it first: publish.hpp.
inline constexpr std::string_view kLogFile = "model.log";
// torch-neuronx's existence lock: created while a process compiles the entry,
// removed after; a process that finds it waits (see storage/lock.hpp).
inline constexpr std::string_view kFrameworkLockFile = "model.hlo_module.pb.lock";
// Ours: integrity record and per-attempt history of the entry.
inline constexpr std::string_view kMetaFile = "npc-entry.json";
// Ours: held (flock) while a compile of the entry is in progress, beside the
// framework's lock (our processes on one host exclude each other with it
// even when a holder dies by SIGKILL).
inline constexpr std::string_view kLockFile = "npc-compile.lock";
// Ours: the log of the last attempt that was killed (SIGKILL from outside,
// or our timeout). Such an attempt is not a cached failure: the entry stays
// pending and the next run compiles it again; the log is kept for reports.
inline constexpr std::string_view kKilledLogFile = "npc-killed.log";

// Ours, under the root: eviction lock, remembered compiler versions, trash.
inline constexpr std::string_view kPrivateDir = ".npc";
inline constexpr std::string_view kEvictionLock = "eviction.lock";
inline constexpr std::string_view kEvictionStamp = "last-eviction";
inline constexpr std::string_view kCompilerVersionsDir = "compilers";
inline constexpr std::string_view kTrashDir = "trash";
// In a cache that is no directory (S3), the eviction lock is a lock object
// (storage/lock.hpp) at this key: no flock reaches it.
inline constexpr std::string_view kStoredEvictionLock = ".npc/eviction/model.hlo_module.pb.lock";

} // namespace npc::cache
