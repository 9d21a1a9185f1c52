// TrainerState and TrainConfig round-trip through JSON (what trainer_state.json holds), and bad
// values in a trainer_state.json are errors naming the field.
#include <nlohmann/json.hpp>

#include "test_util.h"
#include "train/trainer.h"

using namespace zaya;
using namespace zaya::test;

TEST(TrainerState, RoundTripsThroughJson) {
  TrainConfig cfg;
  cfg.dataset = "d";
  cfg.model_config = "m.json";
  cfg.optim.schedule = ScheduleKind::Wsd;
  cfg.optim.lr = 0.02;
  cfg.sample_prompt = "In the \"beginning\"";
  TrainerState s;
  s.step = 42;
  s.optimizer_steps = 40;
  s.skipped = 2;
  s.data = LoaderState{3, 17, 99};
  s.world_size = 3;
  s.global_batch_rows = 48;
  s.config = train_config_to_json(cfg);
  const nlohmann::json j = s;
  EXPECT_EQ(j.at("config").at("optim.schedule"), "wsd");
  const TrainerState back = nlohmann::json::parse(j.dump()).get<TrainerState>();
  EXPECT_EQ(back, s);
  const TrainConfig cfg_back = train_config_from_json(back.config);
  EXPECT_EQ(train_config_to_json(cfg_back), s.config);
  EXPECT_EQ(cfg_back.optim.schedule, ScheduleKind::Wsd);
}

TEST(TrainerState, BadValuesNameTheField) {
  TrainerState s;
  s.step = 5;
  nlohmann::json j = s;
  j["step"] = -7;
  expect_error([&] { (void)j.get<TrainerState>(); }, {"trainer_state.json", "'step'"});
  j["step"] = "five";
  expect_error([&] { (void)j.get<TrainerState>(); }, {"'step'", "non-negative integer"});
  j.erase("step");
  expect_error([&] { (void)j.get<TrainerState>(); }, {"missing 'step'"});
  expect_error([] { train_config_from_json({{"optim.lrr", 1}}); }, {"optim.lrr", "optim.lr"});
  expect_error(
      [] {
        train_config_from_json({{"optim.schedule", "linear"}});
      },
      {"optim.schedule", "cosine, wsd or constant"});
}
