// What neuron_cc_wrapper, started once per graph, does before main: none of
// the start-up work a cache hit once paid for and does not use
// (docs/process-start.md). Read from the program's symbol table, so that a
// change that brings one back fails here, not only in a benchmark.

#include <elf.h>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "paths.hpp"
#include "process.hpp"

namespace npc {
namespace {

std::string defined_symbols(const std::string& program) {
  auto r = test::run({"nm", "-C", "--defined-only", test::program(program).string()});
  EXPECT_EQ(r.exit_code, 0) << "nm (binutils) is needed: " << r.describe();
  return r.out;
}

TEST(ProgramStart, TheWrapperBuildsNoIostreamsOrCli11AtStart) {
  std::string symbols = defined_symbols("neuron_cc_wrapper");
  // The symbol table is there: an empty one would pass for nothing.
  ASSERT_NE(symbols.find("npc::cli::neuron_cc_wrapper_main"), std::string::npos);
  // <iostream>'s initialiser, which builds the locale and its facets.
  EXPECT_EQ(symbols.find("std::ios_base::Init::Init()"), std::string::npos);
  // CLI11's validators are objects built in every file that includes it.
  EXPECT_EQ(symbols.find("CLI::"), std::string::npos);
  // (libcrypto.a's CPU probe does run from .init: docs/process-start.md says
  // what keeping it out cost and why it is no longer kept out.)
}

// Unity batches hold only files the wrapper links anyway (src/CMakeLists.txt):
// one that held a file it does not use would bring that file's code along.
TEST(ProgramStart, TheWrapperCarriesNoMaintenanceExplainOrTransferCode) {
  std::string symbols = defined_symbols("neuron_cc_wrapper");
  ASSERT_NE(symbols.find("npc::cli::neuron_cc_wrapper_main"), std::string::npos);
  for (const char* unused : {"npc::util::Table::print(", "npc::util::parse_command_line(",
                             "npc::cache::verify_cache(", "npc::cache::explain_graph(",
                             "npc::cache::SameGraphIndex::", "npc::cache::find_entries(",
                             "npc::storage::upload_files("}) {
    EXPECT_EQ(symbols.find(unused), std::string::npos) << unused;
  }
}

struct ElfShape {
  bool read = false;
  bool position_independent = false; // ET_DYN: loaded at a random address
  bool has_interpreter = false;      // PT_INTERP: started by the dynamic loader
};

ElfShape elf_shape(const std::string& path) {
  ElfShape shape;
  std::ifstream in(path, std::ios::binary);
  Elf64_Ehdr header{};
  if (!in.read(reinterpret_cast<char*>(&header), sizeof header)) return shape;
  if (std::string(reinterpret_cast<const char*>(header.e_ident), 4) != "\x7f" "ELF") return shape;
  shape.position_independent = header.e_type == ET_DYN;
  for (unsigned i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment{};
    in.seekg(static_cast<std::streamoff>(header.e_phoff + i * header.e_phentsize));
    if (!in.read(reinterpret_cast<char*>(&segment), sizeof segment)) return shape;
    if (segment.p_type == PT_INTERP) shape.has_interpreter = true;
  }
  shape.read = true;
  return shape;
}

// The wrapper is linked -static-pie, and its dynamic build (which serves S3)
// is where the static one looks for it; in sanitizer builds the wrapper is
// the dynamic build alone.
TEST(ProgramStart, TheWrapperIsAStaticPieBesideItsDynamicBuild) {
  ElfShape wrapper = elf_shape(test::program("neuron_cc_wrapper").string());
  ASSERT_TRUE(wrapper.read);
  EXPECT_TRUE(wrapper.position_independent);
  if (test::wrapper_s3_build().empty()) {
    EXPECT_TRUE(wrapper.has_interpreter);
    GTEST_SKIP() << "built without a static wrapper (a sanitizer build)";
  }
  EXPECT_FALSE(wrapper.has_interpreter);
  ElfShape s3_build = elf_shape(test::wrapper_s3_build().string());
  ASSERT_TRUE(s3_build.read) << test::wrapper_s3_build();
  EXPECT_TRUE(s3_build.position_independent);
  EXPECT_TRUE(s3_build.has_interpreter);
  // Both answer --version alike.
  auto version = test::run({test::program("neuron_cc_wrapper").string(), "--version"});
  auto s3_version = test::run({test::wrapper_s3_build().string(), "--version"});
  EXPECT_EQ(version.exit_code, 0) << version.describe();
  EXPECT_EQ(version.out, s3_version.out);
}

} // namespace
} // namespace npc
