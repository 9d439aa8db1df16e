// The libcurl loader of the static neuron_cc_wrapper (src/CMakeLists.txt):
// a static program cannot load libcurl with dlopen (static glibc would bring
// a second libc beside it), so this build hands every command that needs S3
// to its dynamic build, NPC_WRAPPER_S3_BUILD, before it uses S3. If S3 code
// is reached here anyway, it says what happened instead of crashing.
// Every other program links dlopen.cpp beside it, the loader that loads.

#include <npc/storage/curl_library.hpp>
#include <npc/util/error.hpp>

namespace npc::storage {

Result<const CurlLibrary*> load_curl_library() {
  return fail(std::string("this build of neuron_cc_wrapper cannot load ") + kCurlSoname +
              "; S3 caches are served by " NPC_WRAPPER_S3_BUILD " beside it (a bug if seen)");
}

const CurlLibrary& curl_library() {
  auto loaded = load_curl_library();
  throw EnvironmentError(loaded.error());
}

} // namespace npc::storage
