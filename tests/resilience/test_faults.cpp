// The ZAYA_FAULT grammar on its own (resilience/faults.h): every kind with its defaults, and
// each malformed spec a clear error.
#include "resilience/faults.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

TEST(FaultSpecs, ParsesEveryKindWithItsDefaults) {
  const auto f = faults::parse_fault_specs(
      "kill@step:7:rank:1, hang@step:5:section:collective,exit@setup:always,"
      "slow@step:3:rank:1:seconds:0.5,nan@step:30,spike@step:31:factor:50,"
      "corrupt-checkpoint@step:10,kill@step:15:section:checkpoint,slow@preflight:rank:2");
  ASSERT_EQ(f.size(), 9u);
  EXPECT_EQ(f[0].kind, faults::Kind::Kill);
  EXPECT_EQ(f[0].step, 7);
  EXPECT_EQ(f[0].rank, 1);
  EXPECT_EQ(f[0].section, "forward-backward");
  EXPECT_EQ(f[0].text, "kill@step:7:rank:1");
  EXPECT_EQ(f[1].kind, faults::Kind::Hang);
  EXPECT_EQ(f[1].section, "collective");
  EXPECT_LT(f[1].seconds, 0);  // forever
  EXPECT_EQ(f[2].when, faults::When::Setup);
  EXPECT_TRUE(f[2].always);
  EXPECT_EQ(f[2].code, 1);
  EXPECT_DOUBLE_EQ(f[3].seconds, 0.5);
  EXPECT_EQ(f[4].kind, faults::Kind::Nan);
  EXPECT_EQ(f[4].rank, 0);
  EXPECT_DOUBLE_EQ(f[5].factor, 50);
  EXPECT_EQ(f[6].kind, faults::Kind::CorruptCheckpoint);
  EXPECT_EQ(f[7].section, "checkpoint");
  EXPECT_EQ(f[8].when, faults::When::Preflight);
  EXPECT_DOUBLE_EQ(f[8].seconds, 1);  // slow's default
}

TEST(FaultSpecs, BadSpecsAreClearErrors) {
  const auto bad = [](const std::string& spec, const std::string& why) {
    expect_error([&] { faults::parse_fault_specs(spec); }, {why});
  };
  bad("explode@step:3", "unknown fault kind 'explode'");
  bad("kill", "expected KIND@WHEN");
  bad("kill@step", "step needs a number");
  bad("kill@step:0", "step must be a whole number");
  bad("kill@step:2.5", "step must be a whole number");
  bad("kill@tuesday", "unknown time 'tuesday'");
  bad("kill@step:3:rank", "'rank' needs a value");
  bad("kill@step:3:rank:-1", "rank must be a whole number");
  bad("kill@step:3:colour:red", "unknown key 'colour'");
  bad("hang@step:3:section:lunch", "unknown section 'lunch'");
  bad("slow@step:3:seconds:-1", "seconds must be >= 0");
  bad("spike@step:3:factor:0", "factor must be > 0");
  bad("exit@step:3:code:256", "code must be a whole number");
  bad("kill@preflight", "only nan and slow faults can happen at preflight");
  bad("corrupt-checkpoint@setup", "corrupt-checkpoint needs the checkpoint's step");
  bad("kill@step:3,,nan@step:4", "an empty fault spec");
}
