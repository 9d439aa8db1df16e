// neuron_cc_wrapper as torch-neuronx starts it, once per graph: linked
// -static-pie (src/CMakeLists.txt), so that no dynamic loader maps libc and
// binds its symbols at every start, while the program keeps its address
// randomisation.
//
// A static program cannot load libcurl with dlopen (static glibc would bring
// a second libc beside it). The wrapper hands every command that needs S3 to
// its dynamic build, NPC_WRAPPER_S3_BUILD, before it uses S3; and the loader
// of libcurl is replaced here, so that this program links no dlopen at all,
// by one that says what happened if it is reached anyway. (The linker takes
// these definitions and leaves storage/curl_library.cpp out of the link; a
// change that needed that file too would fail on a duplicate symbol.)

#include <npc/cli/programs.hpp>
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

int main(int argc, char** argv) { return npc::cli::neuron_cc_wrapper_main(argc, argv, NPC_WRAPPER_S3_BUILD); }
