// Where current torch-neuronx puts its compile cache. Unlike the older
// developer guide (DIR/neuron-compile-cache), a --cache_dir=DIR in
// NEURON_CC_FLAGS is the root itself.
#pragma once

#include <string>

#include "framework_flags.h"

namespace standin::train {

inline constexpr char kCacheUrlEnv[] = "NEURON_COMPILE_CACHE_URL";
inline constexpr char kDefaultCacheRoot[] = "/var/tmp/neuron-compile-cache";

// --cache_dir, else $NEURON_COMPILE_CACHE_URL (a path or file:///abs/path),
// else /var/tmp/neuron-compile-cache; trailing slashes dropped. The stand-in
// only has a local cache: an s3:// (or any other non-file) URL is a usage error.
std::string resolve_cache_root(const FrameworkFlags& flags);

// Older releases (the developer guide) kept the cache of --cache_dir=DIR at
// DIR/neuron-compile-cache; a URL or the default is the root itself.
inline constexpr char kOlderReleasesCacheDirName[] = "neuron-compile-cache";
std::string resolve_older_releases_cache_root(const FrameworkFlags& flags);

}  // namespace standin::train
