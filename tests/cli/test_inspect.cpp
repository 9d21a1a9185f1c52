// `zaya inspect` on what a user has after training: a run, a checkpoint or a model directory
// (checkpoint/model_path.h; what was picked goes to stderr), showing the trained context from
// tokenizer_config.json beside max_position_embeddings; a config file alone is read as before.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"
#include "infer/whole_model_dir.h"

namespace zaya {
namespace {

using json = nlohmann::json;
using test::CliResult;
using test::expect_user_error;
using test::run_zaya_in;

TEST(InspectCli, ARunShowsItsNewestModelAndTrainedContext) {
  test::ScratchDir d;
  const std::string run = d / "runs/tiny";
  test::save_whole_run(run, {5, 9}, 32);
  const CliResult r = run_zaya_in(d.path, "inspect " + run);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("config                 " + run + "/step_00000009/model/config.json"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("context                32 tokens trained (tokenizer_config.json), 2048 "
                       "positions"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.err, "inspect: model " + run +
                       "/step_00000009/model (the newest valid checkpoint of " + run +
                       ": step 9)\n");
  const CliResult j = run_zaya_in(d.path, "inspect --json " + run + "/step_00000005");
  ASSERT_EQ(j.code, 0) << j.err;
  const json facts = json::parse(j.out);
  EXPECT_EQ(facts["trained_context"], 32);
  EXPECT_EQ(facts["max_position_embeddings"], 2048);
}

TEST(InspectCli, AConfigFileAloneAndWrongPaths) {
  test::ScratchDir d;
  const std::string cfg = std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json";
  const CliResult r = run_zaya_in(d.path, "inspect " + cfg);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("context                2048 positions (max_position_embeddings)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.err, "");
  test::save_whole_model_dir(d / "m", 0);
  expect_user_error(run_zaya_in(d.path, "inspect " + d / "m/nope"),
                    "MODEL " + d / "m/nope" + ": no such file or directory; did you mean " +
                        d / "m" + "? (a model directory)");
}

}  // namespace
}  // namespace zaya
