#include "cache_root.h"

#include <string_view>

#include "env.h"
#include "error.h"

namespace standin::train {
namespace {

constexpr std::string_view kFileScheme = "file://";

std::string local_path(const std::string& url, const std::string& what) {
  std::string path = url;
  if (path.compare(0, kFileScheme.size(), kFileScheme) == 0) {
    path.erase(0, kFileScheme.size());
    if (path.empty() || path[0] != '/') {
      throw usage_error(what + ": a file:// URL needs an absolute path, got '" + url + "'");
    }
  } else if (path.find("://") != std::string::npos) {
    throw usage_error(what + ": the stand-in supports only local cache roots, got '" + url + "'");
  }
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path.empty()) throw usage_error(what + ": empty cache root");
  return path;
}

}  // namespace

std::string resolve_cache_root(const FrameworkFlags& flags) {
  if (flags.cache_dir) return local_path(*flags.cache_dir, std::string(kNeuronCcFlagsEnv) + " --cache_dir");
  if (const auto url = env_string(kCacheUrlEnv)) return local_path(*url, kCacheUrlEnv);
  return kDefaultCacheRoot;
}

std::string resolve_older_releases_cache_root(const FrameworkFlags& flags) {
  std::string root = resolve_cache_root(flags);
  if (!flags.cache_dir) return root;
  return root == "/" ? std::string("/") + kOlderReleasesCacheDirName : root + "/" + kOlderReleasesCacheDirName;
}

}  // namespace standin::train
