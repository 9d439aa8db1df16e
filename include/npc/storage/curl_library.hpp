#pragma once
// libcurl, loaded with dlopen() the first time S3 is used.
//
// Why not link it: every cache hit of a training run starts a new
// neuron_cc_wrapper process, and a hit never touches S3. libcurl.so.4 brings
// about 30 shared libraries with it (nghttp2, idn2, rtmp, ssh2, psl, ssl,
// gssapi/krb5, ldap, sasl, gnutls, nettle, gmp, brotli, ...), and the dynamic
// loader maps and relocates each of them at every start. Loaded on demand,
// only a process that talks to S3 pays for them.
//
// <curl/curl.h> is still included by the callers for its types and
// constants (compile time only); the functions are called through the
// pointers below.

#include <ctime>

#include <curl/curl.h>
// libcurl's headers before 7.75 (Debian 11: 7.74) have no CURLOPT_AWS_SIGV4;
// its number is fixed by the ABI. A libcurl older than 7.75 at run time
// rejects it (CURLE_UNKNOWN_OPTION).
#if !defined(CURLOPT_AWS_SIGV4)
#define CURLOPT_AWS_SIGV4 static_cast<CURLoption>(CURLOPTTYPE_STRINGPOINT + 305)
#endif

#include <npc/util/result.hpp>

namespace npc::storage {

// The libcurl functions the S3 client and the IMDS credentials lookup use.
struct CurlLibrary {
  CURLcode (*global_init)(long flags);
  CURL* (*easy_init)();
  void (*easy_cleanup)(CURL* curl);
  void (*easy_reset)(CURL* curl);
  // curl_easy_setopt and curl_easy_getinfo are variadic in C: called
  // through a pointer of the same variadic type, the arguments are passed
  // exactly as a direct call would pass them.
  CURLcode (*easy_setopt)(CURL* curl, CURLoption option, ...);
  CURLcode (*easy_perform)(CURL* curl);
  CURLcode (*easy_getinfo)(CURL* curl, CURLINFO info, ...);
  const char* (*easy_strerror)(CURLcode code);
  curl_slist* (*slist_append)(curl_slist* list, const char* line);
  void (*slist_free_all)(curl_slist* list);
  time_t (*getdate)(const char* text, const time_t* unused);
};

// The soname loaded: the ABI that <curl/curl.h> of libcurl 7.x and 8.x
// describes (Debian's libcurl4 package).
inline constexpr const char* kCurlSoname = "libcurl.so.4";
// The oldest libcurl that signs S3 requests (CURLOPT_AWS_SIGV4): 7.75.0.
inline constexpr unsigned kMinCurlVersion = 0x074B00;

// Loads libcurl once per process (thread-safe; later calls return the same
// library, or the same failure) and runs curl_global_init. The library is
// never unloaded. The failure reads "cannot load libcurl.so.4 (needed for
// s3:// caches): <reason>; install the libcurl4 package".
[[nodiscard]] Result<const CurlLibrary*> load_curl_library();

// The same, throwing npc::EnvironmentError with that message on failure.
[[nodiscard]] const CurlLibrary& curl_library();

} // namespace npc::storage
