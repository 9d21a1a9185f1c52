// What the trainer checks before step 1 and what it leaves behind: a tokenizer the model cannot
// embed, a tokenizer the dataset was not made with, a seq_len beyond the context, a resumed
// checkpoint of another model config and resume = "none" over another run's checkpoints are
// refused with messages naming both sides; a saved model directory is a whole model (tokenizer
// and generation files, covered by the manifest, the same bytes from an asynchronous save); a run
// resumed at its last step does nothing; checkpoints come every 10% of the steps by default; a
// stop signal ends the run after the step with a checkpoint it resumes from bitwise; a changed
// schedule starts the anomaly window over.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/retention.h"
#include "core/log.h"
#include "data/shards.h"
#include "test_util.h"
#include "train/stop_signal.h"
#include "train/tiny_data.h"
#include "train/trainer.h"

using namespace zaya;
using namespace zaya::test;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// tiny_run, short: 4 steps, a checkpoint at the end.
TrainConfig short_run(const ScratchDir& dir, const std::string& name, const std::string& shards) {
  return short_tiny_run(dir, name, shards, 4);
}

// configs/tiny.json with some fields changed, written to dir/name.
std::string tiny_config_with(const ScratchDir& dir, const std::string& name,
                             const nlohmann::json& changes) {
  nlohmann::json j =
      nlohmann::json::parse(slurp(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json"));
  for (const auto& [k, v] : changes.items()) j[k] = v;
  std::ofstream(dir / name) << j.dump(2);
  return dir / name;
}

std::vector<int64_t> checkpoint_steps(const std::string& root) {
  std::vector<int64_t> steps;
  for (const auto& [step, path] : list_checkpoints(root)) steps.insert(steps.begin(), step);
  return steps;
}

}  // namespace

TEST(TrainerChecks, ATokenizerLargerThanTheModelVocabularyIsRefused) {
  ScratchDir dir;
  TrainConfig c = short_run(dir, "big_tok", make_tiny_dataset(dir));
  c.tokenizer = std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/toy_tokenizer.json";  // 1024 tokens
  expect_error([&] { run_training(c, {.quiet = true}); },
               {"data.tokenizer = " + c.tokenizer, "has 1024 tokens",
                "the model's vocab_size is 512", "model.config = " + c.model_config});
  EXPECT_FALSE(fs::exists(c.checkpoint_dir)) << "refused after training had begun";
}

TEST(TrainerChecks, ATokenizerOtherThanTheDatasetsIsRefusedNamingBoth) {
  ScratchDir dir;
  const TokenizedDataset d = make_tokenized_dataset(dir, 300);
  const std::string other = make_tokenized_dataset(dir, 290).tokenizer;
  TrainConfig c = short_run(dir, "other_tok", d.shards);
  c.tokenizer = other;
  expect_error([&] { run_training(c, {.quiet = true}); },
               {"data.tokenizer = " + other, "is not the tokenizer the dataset was prepared with",
                hex64(file_checksum(other)), d.tokenizer, hex64(file_checksum(d.tokenizer))});
  EXPECT_FALSE(fs::exists(c.checkpoint_dir));
}

TEST(TrainerChecks, ASeqLenBeyondTheModelsContextIsRefused) {
  ScratchDir dir;
  TrainConfig c = short_run(dir, "long", make_tiny_dataset(dir));
  c.model_config = tiny_config_with(dir, "short_context.json", {{"max_position_embeddings", 12}});
  expect_error(
      [&] { run_training(c, {.quiet = true}); },
      {"data.seq_len = 16", "max_position_embeddings = 12", "model.config = " + c.model_config});
}

// A resumed run continues the checkpoint's model: a model.config that says otherwise names the
// fields; the same config in another file is no change.
TEST(TrainerChecks, AResumeWithAnotherModelConfigIsRefusedNamingTheFields) {
  ScratchDir dir;
  TrainConfig c = short_run(dir, "arch", make_tiny_dataset(dir));
  run_training(c, {.quiet = true});
  c.steps = 6;
  TrainConfig changed = c;
  changed.model_config = tiny_config_with(dir, "changed.json", {{"rope_theta", 5000}});
  expect_error([&] { run_training(changed, {.quiet = true}); },
               {"model.config = " + changed.model_config, "step_00000004/model/config.json",
                "rope_theta = 10000", "(checkpoint) vs 5000", "(model.config)"});
  EXPECT_EQ(checkpoint_steps(c.checkpoint_dir), std::vector<int64_t>{4});
  c.model_config = tiny_config_with(dir, "same.json", nlohmann::json::object());
  EXPECT_EQ(run_training(c, {.quiet = true}).steps_done, 6);
}

// resume = "none" into a root holding another run's checkpoints refuses; told to overwrite, it
// deletes them, and the next resume = "auto" continues the new run, never the old one.
TEST(TrainerChecks, ResumeNoneOverAnotherRunRefusesUnlessToldToOverwrite) {
  ScratchDir dir;
  TrainConfig c = short_run(dir, "two_runs", make_tiny_dataset(dir));
  c.checkpoint_every = 2;
  run_training(c, {.quiet = true});
  ASSERT_EQ(checkpoint_steps(c.checkpoint_dir), (std::vector<int64_t>{2, 4}));
  const std::string old4 = slurp(c.checkpoint_dir + "/step_00000004/model/model.safetensors");
  c.resume = ResumeFrom::parse("none");
  c.steps = 3;
  c.seed = 99;  // another run
  expect_error([&] { run_training(c, {.quiet = true}); },
               {"checkpoint.resume = none", c.checkpoint_dir,
                "2 checkpoint(s) of an earlier run (step_00000002 … step_00000004)",
                "checkpoint.overwrite = true"});
  EXPECT_EQ(slurp(c.checkpoint_dir + "/step_00000004/model/model.safetensors"), old4);
  c.checkpoint_overwrite = true;
  run_training(c, {.quiet = true});
  EXPECT_EQ(checkpoint_steps(c.checkpoint_dir), (std::vector<int64_t>{2, 3}));
  c.resume = ResumeFrom::parse("auto");
  c.checkpoint_overwrite = false;
  c.steps = 5;
  const TrainSummary s = run_training(c, {.quiet = true});  // from step 3, not the old 4
  EXPECT_EQ(s.steps_done, 5);
  std::vector<int64_t> logged;
  std::ifstream f(c.metrics);
  for (std::string line; std::getline(f, line);)
    logged.push_back(nlohmann::json::parse(line)["step"].get<int64_t>());
  EXPECT_EQ(logged, (std::vector<int64_t>{1, 2, 3, 4, 5}));
}

TEST(TrainerChecks, ARunResumedAtItsLastStepTrainsNothing) {
  ScratchDir dir;
  TrainConfig c = short_run(dir, "done", make_tiny_dataset(dir));
  run_training(c, {.quiet = true});
  const std::string w = c.checkpoint_dir + "/step_00000004/model/model.safetensors";
  const std::string before = slurp(w);
  const TrainSummary s = run_training(c, {.quiet = true});
  EXPECT_TRUE(s.already_finished);
  EXPECT_EQ(s.steps_done, 4);
  EXPECT_EQ(s.checkpoint, c.checkpoint_dir + "/step_00000004");
  EXPECT_EQ(slurp(w), before);
  c.steps = 5;  // raised: it continues
  const TrainSummary more = run_training(c, {.quiet = true});
  EXPECT_FALSE(more.already_finished);
  EXPECT_EQ(more.steps_done, 5);
}

// The model directory of every checkpoint holds the run's tokenizer (byte for byte), the trained
// context and the special tokens, listed in the manifest; an asynchronous save writes the same
// bytes as a synchronous one.
TEST(TrainerChecks, EveryModelDirectoryIsAWholeModel) {
  ScratchDir dir;
  const TokenizedDataset d = make_tokenized_dataset(dir, 300);
  const Tokenizer tok = Tokenizer::load(d.tokenizer);
  TrainConfig sync = short_run(dir, "sync", d.shards), async = short_run(dir, "async", d.shards);
  sync.tokenizer = async.tokenizer = d.tokenizer;
  sync.sample_tokens = async.sample_tokens = 0;
  async.async_checkpoint = true;
  run_training(sync, {.quiet = true});
  run_training(async, {.quiet = true});
  const std::string a = sync.checkpoint_dir + "/step_00000004";
  const std::string b = async.checkpoint_dir + "/step_00000004";
  EXPECT_EQ(slurp(a + "/model/tokenizer.json"), slurp(d.tokenizer));
  const nlohmann::json tc = nlohmann::json::parse(slurp(a + "/model/tokenizer_config.json"));
  EXPECT_EQ(tc, (nlohmann::json{{"model_max_length", 16},
                                {"bos_token", std::string(tok.token(tok.bos_id()))},
                                {"eos_token", std::string(tok.token(tok.eos_id()))},
                                {"tokenizer_class", "PreTrainedTokenizerFast"}}));
  const nlohmann::json gc = nlohmann::json::parse(slurp(a + "/model/generation_config.json"));
  EXPECT_EQ(
      gc, (nlohmann::json{
              {"bos_token_id", tok.bos_id()}, {"eos_token_id", tok.eos_id()}, {"max_length", 16}}));
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json",
                        "model.safetensors", "config.json"})
    EXPECT_EQ(slurp(b + "/model/" + f), slurp(a + "/model/" + f)) << f << ": async differs";
  // Covered by the manifest: a changed tokenizer.json is a corrupted checkpoint.
  ASSERT_EQ(verify_checkpoint(a), "");
  std::ofstream(a + "/model/tokenizer.json", std::ios::app) << " ";
  EXPECT_NE(verify_checkpoint(a).find("model/tokenizer.json"), std::string::npos)
      << verify_checkpoint(a);
}

// data.tokenizer empty: the dataset's own tokenizer (as dataset.json records it) is the run's.
TEST(TrainerChecks, TheDatasetsOwnTokenizerServesWhenNoneIsGiven) {
  ScratchDir dir;
  const TokenizedDataset d = make_tokenized_dataset(dir, 300);
  TrainConfig c = short_run(dir, "own_tok", d.shards);
  ASSERT_TRUE(c.tokenizer.empty());
  run_training(c, {.quiet = true});
  EXPECT_EQ(slurp(c.checkpoint_dir + "/step_00000004/model/tokenizer.json"), slurp(d.tokenizer));
  // Without a recorded tokenizer there is none to copy; the context is still recorded.
  TrainConfig bytes = short_run(dir, "no_tok", dir / "shards");  // bytes: no tokenizer recorded
  run_training(bytes, {.quiet = true});
  const std::string m = bytes.checkpoint_dir + "/step_00000004/model";
  EXPECT_FALSE(fs::exists(m + "/tokenizer.json"));
  EXPECT_EQ(nlohmann::json::parse(slurp(m + "/tokenizer_config.json")),
            (nlohmann::json{{"model_max_length", 16}}));
  EXPECT_EQ(nlohmann::json::parse(slurp(m + "/generation_config.json")),
            (nlohmann::json{{"bos_token_id", 2}, {"eos_token_id", 1}, {"max_length", 16}}));
}

// A model whose vocabulary is larger than the tokenizer's trains with a warning, and its samples
// (at the end, after the final checkpoint) draw only ids the tokenizer decodes.
TEST(TrainerChecks, AVocabularyLargerThanTheTokenizerWarnsAndSamplesDecode) {
  ScratchDir dir;
  const TokenizedDataset d = make_tokenized_dataset(dir, 300);
  TrainConfig c = short_run(dir, "wide", d.shards);
  c.tokenizer = d.tokenizer;
  c.sample_tokens = 200;
  c.sample_temperature = 5;       // flat: the untrained ids 300…511 would come up at once
  set_log_level(LogLevel::Info);  // (a quiet run before sets it quiet for the process)
  testing::internal::CaptureStderr();
  const TrainSummary s = run_training(c, {});
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(s.steps_done, 4);
  EXPECT_NE(err.find("warning: the model's vocab_size is 512"), std::string::npos) << err;
  EXPECT_NE(err.find("has only 300 tokens"), std::string::npos) << err;
  EXPECT_NE(err.find("\nsample @ step 4: "), std::string::npos) << err;
  EXPECT_EQ(err.find("no sample"), std::string::npos) << err;
  EXPECT_EQ(verify_checkpoint(c.checkpoint_dir + "/step_00000004"), "");
}

TEST(TrainerChecks, CheckpointsComeEveryTenthOfTheStepsByDefault) {
  ScratchDir dir;
  TrainConfig c = tiny_run(dir, "every", make_tiny_dataset(dir));
  c.micro_batch = 2;
  c.grad_accum = 1;
  c.checkpoint_every = -1;  // the default
  c.keep_last = 0;
  c.steps = 20;
  run_training(c, {.quiet = true});
  EXPECT_EQ(checkpoint_steps(c.checkpoint_dir),
            (std::vector<int64_t>{2, 4, 6, 8, 10, 12, 14, 16, 18, 20}));
  // checkpoint.dir = "none": no checkpoints, and the summary says there is none.
  TrainConfig off = tiny_run(dir, "off", dir / "shards");
  off.checkpoint_dir = "none";
  off.steps = 2;
  EXPECT_EQ(run_training(off, {.quiet = true}).checkpoint, "");
  EXPECT_FALSE(fs::exists(dir / "none"));
}

// SIGINT during a run: the step finishes, a checkpoint is written, and the resumed run ends with
// the bits of an uninterrupted one.
TEST(TrainerChecks, AStopSignalSavesAfterTheStepAndTheResumeIsBitwise) {
  ScratchDir dir;
  const std::string shards = make_tiny_dataset(dir);
  TrainConfig straight = short_run(dir, "straight", shards),
              halves = short_run(dir, "halves", shards);
  straight.steps = halves.steps = 6;
  run_training(straight, {.quiet = true});
  install_stop_signals(/*announce=*/false);
  std::raise(SIGINT);  // before step 1: the first step sees it
  const TrainSummary stopped = run_training(halves, {.quiet = true});
  clear_stop_signal();
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  EXPECT_EQ(stopped.stop_signal, SIGINT);
  EXPECT_EQ(stopped.steps_done, 1);
  EXPECT_EQ(stopped.checkpoint, halves.checkpoint_dir + "/step_00000001");
  EXPECT_EQ(verify_checkpoint(stopped.checkpoint), "");
  const TrainSummary rest = run_training(halves, {.quiet = true});
  EXPECT_EQ(rest.stop_signal, 0);
  EXPECT_EQ(rest.steps_done, 6);
  const std::string w = "/step_00000006/model/model.safetensors";
  EXPECT_TRUE(slurp(straight.checkpoint_dir + w) == slurp(halves.checkpoint_dir + w))
      << "the resumed run's final weights differ";
}

// train.steps raised to continue a finished run: the cosine does not end where it did, so the
// anomaly window of the old learning rates starts over (else the first new step is a "spike").
TEST(TrainerChecks, ARaisedStepCountStartsTheAnomalyWindowOver) {
  ScratchDir dir;
  TrainConfig c = short_run(dir, "extend", make_tiny_dataset(dir));
  run_training(c, {.quiet = true});
  set_log_level(LogLevel::Info);
  testing::internal::CaptureStderr();
  run_training(c, {});  // already finished: nothing changed, nothing said
  c.steps = 8;
  run_training(c, {});
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("window starts over"), err.rfind("window starts over")) << err;
  EXPECT_NE(err.find("train.steps 4 → 8"), std::string::npos) << err;
  EXPECT_NE(err.find("the anomaly guard's window starts over"), std::string::npos) << err;
}
