// compile/target: which --target the compiler gets. Flags naming one win;
// then NEURON_PLATFORM_TARGET_OVERRIDE (checked); then the instance's DMI
// product name; then trn1.

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/compile/driver.hpp>
#include <npc/compile/target.hpp>
#include <npc/util/error.hpp>

#include "test_support.hpp"

namespace npc::compile {
namespace {

TEST(FlagsNameTarget, BothFormsAndNothingElse) {
  EXPECT_TRUE(flags_name_target({"-O2", "--target=trn2"}));
  EXPECT_TRUE(flags_name_target({"--target", "inf2"}));
  EXPECT_FALSE(flags_name_target({}));
  EXPECT_FALSE(flags_name_target({"-O2", "--targets=x", "--target-x", "trn2"}));
}

TEST(TargetFromProductName, InstanceFamilies) {
  EXPECT_EQ(target_from_product_name("trn1.32xlarge"), "trn1");
  EXPECT_EQ(target_from_product_name("trn1.2xlarge\n"), "trn1");
  EXPECT_EQ(target_from_product_name("trn1n.32xlarge"), "trn1");
  EXPECT_EQ(target_from_product_name("trn2.48xlarge"), "trn2");
  EXPECT_EQ(target_from_product_name("trn2u.48xlarge"), "trn2");
  EXPECT_EQ(target_from_product_name("inf2.xlarge"), "inf2");
  EXPECT_EQ(target_from_product_name("  inf2.48xlarge \n"), "inf2");
  EXPECT_EQ(target_from_product_name("TRN1.32XLARGE"), "trn1");
}

TEST(TargetFromProductName, AnythingElseIsUnknown) {
  for (const char* name : {"", "\n", "trn1", "trn1.", "c5.xlarge", "inf1.xlarge", "trn3.48xlarge",
                           "Standard PC (Q35 + ICH9, 2009)", "HVM domU", "xtrn1.32xlarge", "trn1x.32xlarge"})
    EXPECT_EQ(target_from_product_name(name), std::nullopt) << "[" << name << "]";
}

class TargetFileTest : public test::TempDirTest {
protected:
  fs::path dmi(const std::string& text) {
    fs::path p = dir() / "product_name";
    test::write_text(p, text);
    return p;
  }
};

TEST_F(TargetFileTest, DetectReadsTheDmiFile) {
  EXPECT_EQ(detect_target(dmi("trn2.48xlarge\n")), "trn2");
  EXPECT_EQ(detect_target(dmi("m5.large\n")), std::nullopt);
  EXPECT_EQ(detect_target(dir() / "missing"), std::nullopt);
  EXPECT_EQ(detect_target(dir()), std::nullopt); // a directory
  // Not a product name: far longer than one.
  EXPECT_EQ(detect_target(dmi("trn1.32xlarge" + std::string(1000, ' '))), std::nullopt);
}

TEST_F(TargetFileTest, OverrideWinsOverTheMachine) {
  Target t = choose_target("inf2", dmi("trn1.32xlarge\n"));
  EXPECT_EQ(t.name, "inf2");
  EXPECT_EQ(t.source, TargetSource::override_variable);
  EXPECT_EQ(choose_target("trn1n", dmi("trn2.48xlarge\n")).name, "trn1n"); // passed as given
}

TEST_F(TargetFileTest, MachineWhenTheOverrideIsUnsetOrEmpty) {
  Target t = choose_target(std::nullopt, dmi("trn2.48xlarge\n"));
  EXPECT_EQ(t.name, "trn2");
  EXPECT_EQ(t.source, TargetSource::machine);
  EXPECT_EQ(choose_target(std::string(), dmi("inf2.xlarge\n")).name, "inf2");
}

TEST_F(TargetFileTest, Trn1WhenNothingTells) {
  Target t = choose_target(std::nullopt, dir() / "missing");
  EXPECT_EQ(t.name, "trn1");
  EXPECT_EQ(t.source, TargetSource::fallback);
  EXPECT_EQ(choose_target(std::nullopt, dmi("c5.xlarge")).source, TargetSource::fallback);
}

TEST_F(TargetFileTest, BadOverrideIsAUsageErrorNamingVariableAndValues) {
  for (const char* bad : {"trn3", "TRN1", "trn1 ", "x"}) {
    try {
      std::ignore = choose_target(std::string(bad), dmi("trn1.32xlarge"));
      ADD_FAILURE() << "no error for [" << bad << "]";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()), std::string("NEURON_PLATFORM_TARGET_OVERRIDE has the bad value '") + bad +
                                           "': expected one of trn1, trn1n, trn2, inf2 (or unset it)");
    }
  }
}

// compiler_argv through the process's environment.
class CompilerArgvTest : public ::testing::Test {
protected:
  void TearDown() override { ::unsetenv(kTargetOverrideVariable); }
  static CompileJob job(std::vector<std::string> flags) {
    return CompileJob{"/opt/neuronx-cc", "/c/g.pb", "/c/w/model.neff", std::move(flags), "/c/w", "/c/w/log", {}, {}, false, std::nullopt};
  }
};

TEST_F(CompilerArgvTest, FlagsNamingATargetAreLeftAlone) {
  ::setenv(kTargetOverrideVariable, "inf2", 1);
  EXPECT_EQ(compiler_argv(job({"-O2", "--target", "trn2"})),
            (std::vector<std::string>{"/opt/neuronx-cc", "compile", "--framework=XLA", "/c/g.pb", "--output",
                                      "/c/w/model.neff", "-O2", "--target", "trn2"}));
  // Even a bad override: the flags decide, the variable is not consulted.
  ::setenv(kTargetOverrideVariable, "trn3", 1);
  EXPECT_EQ(compiler_argv(job({"--target=trn1n"})).back(), "--target=trn1n");
}

TEST_F(CompilerArgvTest, OverrideIsAddedLast) {
  ::setenv(kTargetOverrideVariable, "trn2", 1);
  EXPECT_EQ(compiler_argv(job({"-O1"})),
            (std::vector<std::string>{"/opt/neuronx-cc", "compile", "--framework=XLA", "/c/g.pb", "--output",
                                      "/c/w/model.neff", "-O1", "--target=trn2"}));
  ::setenv(kTargetOverrideVariable, "bogus", 1);
  EXPECT_THROW(std::ignore = compiler_argv(job({"-O1"})), UsageError);
}

TEST_F(CompilerArgvTest, WithoutOverrideTheMachinesTarget) {
  ::unsetenv(kTargetOverrideVariable);
  std::string expected = "--target=" + detect_target(kDmiProductNamePath).value_or("trn1");
  EXPECT_EQ(compiler_argv(job({})).back(), expected);
  EXPECT_EQ(target_for({}), detect_target(kDmiProductNamePath).value_or("trn1"));
  EXPECT_EQ(target_for({"--target=inf2"}), std::nullopt);
}

} // namespace
} // namespace npc::compile
