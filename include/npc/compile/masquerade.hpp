#pragma once
// neuron_cc_wrapper reached under the name `neuronx-cc` (a link in a
// directory put first on PATH, as ccache's masquerade directory): the real
// compiler's own command line, as TorchNeuron and vLLM-Neuron give it once
// per graph,
//
//   neuronx-cc compile <tmp>/module.hlo.pb --framework XLA --target trn2
//              --lnc 1 -O2 --model-type transformer ... --output <tmp>/module.neff
//
// read well enough to cache it, and nothing more: a command line this does
// not understand goes to the real compiler untouched (cli/as_neuronx_cc.cpp).
//
// What keys a compile (cache/key.hpp's make_key, in libneuronxla's layout):
//  - the input's bytes, and the bytes of every file the input names by an
//    absolute path that exists as a regular file when the compile starts
//    (an NKI kernel's source named in a custom call's backend_config, say):
//    editing such a file is a miss, never a stale hit. A path that names a
//    directory or nothing is only the input's bytes. A source location in
//    the input (the training script's path in an MLIR loc) joins the key
//    the same way: editing that script is a miss too;
//  - the words as given, but for the input, --output and the options that
//    only say where to write (--logfile, --workdir): those name fresh
//    temporary paths on every run;
//  - the real compiler's version.
// An option the real compiler takes a value for is known by name; an
// unknown option written without `=` might take the next word, so such a
// command line is not cached.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <npc/util/result.hpp>

namespace npc::compile {

namespace fs = std::filesystem;

// Set in the real compiler's environment: a masquerade that finds it set
// was reached again through the real compiler's own lookup (a script that
// runs `neuronx-cc` from PATH again; a copy of this program further down
// PATH is passed over, see find_compiler_named), and stops rather than call
// itself for ever.
inline constexpr const char* kMasqueradeActiveEnv = "NEURON_CC_WRAPPER_MASQUERADE_ACTIVE";

// A `neuronx-cc compile ...` command line this program can cache.
struct RealCompilerCall {
  std::vector<std::string> words; // after the program name, as given
  fs::path input;
  fs::path output;
  std::size_t output_word = 0;   // the word that holds the output path
  bool output_attached = false;  // "--output=PATH" (else the word is PATH alone)
  std::vector<std::string> key_flags; // the words that key the compile (see above)
};

// nullopt, with the reason in `why`, for a command line to hand over untouched.
[[nodiscard]] std::optional<RealCompilerCall> parse_real_compiler_call(const std::vector<std::string>& words,
                                                                       std::string& why);

// The call's words, its output replaced by `neff`.
[[nodiscard]] std::vector<std::string> with_output(const RealCompilerCall& call, const fs::path& neff);

// Whether `candidate` is a program of ours rather than a compiler: a build
// of ours however it was installed (a link, a copy, a hard link, a rename:
// util/build_note.hpp), or a link to a file named neuron_cc_wrapper (a
// release from before the note). `version` is set to the build's version
// when the note gives one.
[[nodiscard]] bool is_our_program(const fs::path& candidate, std::string* version = nullptr);

// The compiler `name` stands for, never a program of ours: a name without a
// slash is looked up on PATH, passing over every program of ours (the
// masquerade directory, a copy of the wrapper, a second one further on); a
// path is taken as it is, unless it is ours. What every program of ours
// runs as the compiler (compiler.hpp), so that no compile goes through the
// masquerade and is cached twice, and the masquerade never runs itself as
// the real compiler. Fails saying what was searched and what was passed
// over; the caller says where the name came from and what to do.
[[nodiscard]] Result<fs::path> find_compiler_named(const std::string& name);

// The real compiler, for the masquerade: $NEURON_CC when set, else
// `neuronx-cc` on PATH, both through find_compiler_named. Fails with one
// line that says what to do.
[[nodiscard]] Result<fs::path> find_real_compiler();

// A file the input names by its absolute path, with its content's digest.
struct NamedFile {
  std::string path;
  std::string sha256;
};

// What keys the input: its digest and the files it names (sorted by path).
struct InputDigest {
  std::string sha256;            // of the input's bytes
  std::uint64_t size = 0;
  std::vector<NamedFile> named;  // regular files, as above
  // The graph part of the key: the input's digest alone when it names no
  // file, else a digest of it and of every named file's path and digest.
  [[nodiscard]] std::string key_sha256() const;
};

// Reads the input once, hashing it and finding the absolute paths in it.
[[nodiscard]] Result<InputDigest> digest_input(const fs::path& input);

} // namespace npc::compile
