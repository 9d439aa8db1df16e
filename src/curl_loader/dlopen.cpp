#include <npc/storage/curl_library.hpp>

#include <dlfcn.h>
#include <string>

namespace npc::storage {

namespace {

Failure load_failure(const std::string& reason) {
  return fail(std::string("cannot load ") + kCurlSoname + " (needed for s3:// caches): " + reason +
              "; install the libcurl4 package");
}

// Resolves `name` into `slot`, or says which symbol is missing.
template <typename Function> bool resolve(void* handle, const char* name, Function& slot, std::string& missing) {
  ::dlerror(); // clear a stale error: dlsym reports through it
  void* symbol = ::dlsym(handle, name);
  if (symbol == nullptr) {
    const char* error = ::dlerror();
    missing = error != nullptr ? error : std::string(name) + " not found";
    return false;
  }
  slot = reinterpret_cast<Function>(symbol);
  return true;
}

Result<const CurlLibrary*> load_once() {
  // RTLD_LOCAL: libcurl's symbols (and those of its dependencies) stay out
  // of the global namespace, so nothing else in the process binds to them by
  // accident. RTLD_NOW: a broken installation fails here, with a message,
  // rather than at the first call of a missing function.
  void* handle = ::dlopen(kCurlSoname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = ::dlerror();
    return load_failure(error != nullptr ? error : "dlopen failed");
  }
  // Never freed, never dlclose'd: easy handles live until the process ends,
  // and libcurl cannot be unloaded safely while its threads (DNS) may run.
  static CurlLibrary curl{};
  std::string missing;
  bool ok = resolve(handle, "curl_global_init", curl.global_init, missing) &&
            resolve(handle, "curl_easy_init", curl.easy_init, missing) &&
            resolve(handle, "curl_easy_cleanup", curl.easy_cleanup, missing) &&
            resolve(handle, "curl_easy_reset", curl.easy_reset, missing) &&
            resolve(handle, "curl_easy_setopt", curl.easy_setopt, missing) &&
            resolve(handle, "curl_easy_perform", curl.easy_perform, missing) &&
            resolve(handle, "curl_easy_getinfo", curl.easy_getinfo, missing) &&
            resolve(handle, "curl_easy_strerror", curl.easy_strerror, missing) &&
            resolve(handle, "curl_slist_append", curl.slist_append, missing) &&
            resolve(handle, "curl_slist_free_all", curl.slist_free_all, missing) &&
            resolve(handle, "curl_getdate", curl.getdate, missing);
  if (!ok) return load_failure(missing);
  // S3 requests are signed by libcurl (CURLOPT_AWS_SIGV4, from 7.75.0): an
  // older one would send them unsigned, and every one would be refused.
  using VersionInfo = curl_version_info_data* (*)(CURLversion);
  VersionInfo version_info = nullptr;
  if (!resolve(handle, "curl_version_info", version_info, missing)) return load_failure(missing);
  const curl_version_info_data* version = version_info(CURLVERSION_NOW);
  if (version == nullptr || version->version_num < kMinCurlVersion)
    return fail(std::string(kCurlSoname) + " is version " + (version != nullptr ? version->version : "unknown") +
                ", which cannot sign S3 requests (AWS SigV4 needs libcurl 7.75.0 or newer): install a newer "
                "libcurl4 for s3:// caches");
  // Once per process, before any easy handle: not every libcurl makes
  // curl_global_init safe to run from two threads at once, and here it runs
  // under the static initialisation's lock.
  if (CURLcode code = curl.global_init(CURL_GLOBAL_DEFAULT); code != CURLE_OK)
    return load_failure(std::string("curl_global_init failed: ") + curl.easy_strerror(code));
  return static_cast<const CurlLibrary*>(&curl);
}

} // namespace

Result<const CurlLibrary*> load_curl_library() {
  // A function-local static is initialised once, by the first caller, while
  // any concurrent caller waits (C++11 "magic statics").
  static const Result<const CurlLibrary*> loaded = load_once();
  return loaded;
}

const CurlLibrary& curl_library() {
  auto loaded = load_curl_library();
  if (!loaded) throw EnvironmentError(loaded.error());
  return **loaded;
}

} // namespace npc::storage
