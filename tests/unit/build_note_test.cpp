// util/build_note: every program of ours says so in its own bytes, and a
// copy, a hard link or a renamed copy of one still does; nothing else does.

#include <unistd.h>

#include <gtest/gtest.h>

#include <npc/util/build_note.hpp>

#include "paths.hpp"
#include "temp_dir.hpp"
#include "test_support.hpp"

namespace npc::util {
namespace {

using npc::test::write_text;

class BuildNoteTest : public npc::test::TempDirTest {};

TEST_F(BuildNoteTest, EveryProgramOfOursCarriesItsVersion) {
  for (const char* name : {"neuron_cc_wrapper", "neuron_parallel_compile", "neuron_cache"})
    EXPECT_EQ(build_of_ours(npc::test::program(name)), NPC_VERSION) << name;
  if (!npc::test::wrapper_s3_build().empty()) {
    EXPECT_EQ(build_of_ours(npc::test::wrapper_s3_build()), NPC_VERSION) << "the wrapper's dynamic build";
  }
}

TEST_F(BuildNoteTest, ACopyAHardLinkAndARenamedCopyAreStillOurs) {
  const fs::path wrapper = npc::test::program("neuron_cc_wrapper");
  fs::create_directories(dir() / "m");
  fs::copy_file(wrapper, dir() / "m" / "neuronx-cc");
  fs::copy_file(wrapper, dir() / "my-compiler");
  std::error_code ec;
  fs::create_hard_link(dir() / "my-compiler", dir() / "hard-link", ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(build_of_ours(dir() / "m" / "neuronx-cc"), NPC_VERSION);
  EXPECT_EQ(build_of_ours(dir() / "my-compiler"), NPC_VERSION);
  EXPECT_EQ(build_of_ours(dir() / "hard-link"), NPC_VERSION);
  // Stripped as a distribution's packaging would: the note is loaded, so kept.
  fs::copy_file(wrapper, dir() / "stripped");
  auto strip = npc::test::run({"strip", "--strip-all", (dir() / "stripped").string()});
  ASSERT_EQ(strip.exit_code, 0) << strip.describe();
  EXPECT_EQ(build_of_ours(dir() / "stripped"), NPC_VERSION);
}

TEST_F(BuildNoteTest, TheRealCompilerAndOtherProgramsAreNot) {
  // neuronx-cc as pip installs it: a Python console script.
  write_text(dir() / "neuronx-cc",
             "#!/opt/aws_neuronx_venv/bin/python3\n# -*- coding: utf-8 -*-\nimport re\nimport sys\n"
             "from neuronxcc.driver.CommandDriver import main\nif __name__ == '__main__':\n"
             "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n    sys.exit(main())\n");
  EXPECT_EQ(build_of_ours(dir() / "neuronx-cc"), std::nullopt);
  EXPECT_EQ(build_of_ours(npc::test::standin_compiler()), std::nullopt) << "an ELF program, not ours";
  EXPECT_EQ(build_of_ours("/proc/self/exe"), std::nullopt) << "these tests link our code, but are no program of ours";
  EXPECT_EQ(build_of_ours("/bin/sh"), std::nullopt);
}

} // namespace
} // namespace npc::util
