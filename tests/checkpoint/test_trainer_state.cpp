// TrainerState and TrainConfig round-trip through JSON (what trainer_state.json holds), and bad
// values in a trainer_state.json are errors naming the field.
#include <nlohmann/json.hpp>

#include "checkpoint/trainer_state.h"
#include "test_util.h"
#include "train/train_config.h"

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
  expect_error([&] { (void)j.get<TrainerState>(); }, {"trainer_state.json", "\"step\" is -7"});
  j["step"] = "five";
  expect_error([&] { (void)j.get<TrainerState>(); }, {"\"step\" is \"five\"", "an integer"});
  j.erase("step");
  expect_error([&] { (void)j.get<TrainerState>(); }, {"\"step\" is missing"});
  expect_error([] { train_config_from_json({{"optim.lrr", 1}}); }, {"optim.lrr", "optim.lr"});
  expect_error(
      [] {
        train_config_from_json({{"optim.schedule", "linear"}});
      },
      {"optim.schedule", "cosine, wsd or constant"});
}

TEST(TrainerState, ValuesAreRangeChecked) {
  const std::string path = "/ckpt/step_00000010/trainer_state.json";
  const nlohmann::json ok = {
      {"step", 10},      {"optimizer_steps", 10},  {"skipped", 0},
      {"world_size", 1}, {"global_batch_rows", 8}, {"data", {{"epoch", 0}, {"position", 0}}}};
  EXPECT_EQ(parse_trainer_state(ok, path).step, 10);
  auto with = [&](const char* key, nlohmann::json v) {
    nlohmann::json j = ok;
    j[key] = std::move(v);
    return j;
  };
  expect_error([&] { parse_trainer_state(with("step", -7), path); },
               {"trainer_state.json", "\"step\" is -7"});
  expect_error([&] { parse_trainer_state(with("step", INT64_MAX), path); }, {"\"step\" is"});
  expect_error([&] { parse_trainer_state(with("step", 11), path); },
               {"\"step\" is 11 but the directory is step_00000010"});
  expect_error([&] { parse_trainer_state(with("optimizer_steps", -1), path); },
               {"\"optimizer_steps\" is -1"});
  expect_error([&] { parse_trainer_state(with("skipped", 11), path); }, {"\"skipped\" is 11"});
  expect_error([&] { parse_trainer_state(with("world_size", 0), path); }, {"\"world_size\" is 0"});
  expect_error([&] { parse_trainer_state(with("step", "10"), path); }, {"\"step\" is \"10\""});
}
