// infer/model_files.h: the tokenizer, the context and the special ids generate and serve take
// from a model directory — the trained context by default, --max-context past it with a warning
// and never past max_position_embeddings, EOS and BOS from the generation and tokenizer configs.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "chat_model_dir.h"
#include "data/tokenizer.h"
#include "infer/infer_model.h"
#include "infer/model_files.h"
#include "infer/whole_model_dir.h"
#include "test_util.h"

namespace zaya {
namespace {

using test::error_of;
using test::expect_contains;
using test::ScratchDir;

ZayaConfig tiny_config() {
  ZayaConfig c = load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json");
  c.vocab_size = 1024;
  return c;  // max_position_embeddings 2048, eos_token_id 1
}

TEST(ModelFiles, TheTokenizerIsTheFlagsElseTheModelDirectorys) {
  ScratchDir dir;
  test::save_whole_model_dir(dir / "m", 0);
  EXPECT_EQ(find_tokenizer(dir / "m", ""), dir / "m/tokenizer.json");
  EXPECT_EQ(find_tokenizer(dir / "m", "/some/other.json"), "/some/other.json");
  std::filesystem::remove(dir / "m/tokenizer.json");
  EXPECT_EQ(find_tokenizer(dir / "m", ""), "");
  const std::string msg = error_of([&] { fail_no_tokenizer(dir / "m", "use --prompt-ids"); });
  expect_contains(msg, dir / "m" + ": no tokenizer.json in the model directory");
  expect_contains(msg, "pass --tokenizer FILE");
  expect_contains(msg, "or use --prompt-ids");
}

// A tokenizer with ids the model does not have is named with both sizes; a smaller one is fine.
TEST(ModelFiles, ATokenizerLargerThanTheVocabularyIsAWarning) {
  const Tokenizer tok =
      Tokenizer::load(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/toy_tokenizer.json");
  ZayaConfig c = tiny_config();
  EXPECT_EQ(tokenizer_fit_warning(tok, "t.json", c), "");
  c.vocab_size = 2048;
  EXPECT_EQ(tokenizer_fit_warning(tok, "t.json", c), "");
  c.vocab_size = 96;
  const std::string w = tokenizer_fit_warning(tok, "t.json", c);
  expect_contains(w, "t.json has 1024 token ids but the model's vocabulary is 96");
}

TEST(ModelFiles, TheContextIsTheTrainedOneUnlessAskedOtherwise) {
  const ZayaConfig c = tiny_config();
  ModelExtras x;
  // No model_max_length: max_position_embeddings.
  ContextLimit L = choose_context(c, x, 0);
  EXPECT_EQ(L.tokens, 2048);
  EXPECT_EQ(L.trained, 2048);
  expect_contains(L.source, "max_position_embeddings");
  EXPECT_TRUE(L.warnings.empty());
  // The trained context: model_max_length.
  x.tokenizer_config = "m/tokenizer_config.json";
  x.model_max_length = 128;
  L = choose_context(c, x, 0);
  EXPECT_EQ(L.tokens, 128);
  EXPECT_EQ(L.trained, 128);
  EXPECT_EQ(L.max_positions, 2048);
  expect_contains(L.source, "trained");
  expect_contains(L.source, "model_max_length");
  EXPECT_TRUE(L.warnings.empty());
  // Less than trained: as asked, no warning.
  L = choose_context(c, x, 64);
  EXPECT_EQ(L.tokens, 64);
  EXPECT_TRUE(L.warnings.empty());
  // Past the trained context: allowed up to max_position_embeddings, with a warning naming both.
  L = choose_context(c, x, 1000);
  EXPECT_EQ(L.tokens, 1000);
  ASSERT_EQ(L.warnings.size(), 1u);
  expect_contains(L.warnings[0], "--max-context 1000");
  expect_contains(L.warnings[0], "128 tokens the model was trained on");
  EXPECT_EQ(choose_context(c, x, 2048).tokens, 2048);
  // Past max_position_embeddings: refused, naming both.
  const std::string msg = error_of([&] { choose_context(c, x, 4096); });
  expect_contains(msg, "--max-context 4096");
  expect_contains(msg, "max_position_embeddings of 2048");
  // A model_max_length beyond max_position_embeddings is capped, with a warning.
  x.model_max_length = 8192;
  L = choose_context(c, x, 0);
  EXPECT_EQ(L.tokens, 2048);
  ASSERT_EQ(L.warnings.size(), 1u);
  expect_contains(L.warnings[0], "model_max_length 8192 exceeds");
}

TEST(ModelFiles, SpecialIdsComeFromTheGenerationAndTokenizerConfigs) {
  const ZayaConfig c = tiny_config();
  const Tokenizer tok =
      Tokenizer::load(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/toy_tokenizer.json");
  ModelExtras x;
  EXPECT_EQ(eos_ids(c, x), (std::vector<int32_t>{1}));  // config.json's
  EXPECT_EQ(bos_id(c, x, &tok), tok.bos_id());          // the tokenizer's "<bos>"
  EXPECT_EQ(bos_id(c, x, nullptr), -1);
  // tokenizer_config.json's bos_token text, looked up in the tokenizer.
  x.tokenizer_config = "m/tokenizer_config.json";
  x.bos_token = std::string(tok.token(5));
  EXPECT_EQ(bos_id(c, x, &tok), 5);
  x.bos_token = "<no such token>";
  expect_contains(error_of([&] { bos_id(c, x, &tok); }), "bos_token '<no such token>'");
  // generation_config.json's ids win.
  x.generation_config = "m/generation_config.json";
  x.bos_token_id = 9;
  x.eos_token_ids = {3, 4};
  EXPECT_EQ(bos_id(c, x, &tok), 9);
  EXPECT_EQ(eos_ids(c, x), (std::vector<int32_t>{3, 4}));
  x.eos_token_ids = {3, 1024};
  const std::string msg = error_of([&] { eos_ids(c, x); });
  expect_contains(msg, "m/generation_config.json: eos_token_id 1024");
  expect_contains(msg, "vocabulary of 1024");
}

TEST(ModelFiles, TheStopSetAddsTheTokenizersEndTokens) {
  const ZayaConfig c = tiny_config();
  const Tokenizer tok =
      Tokenizer::load(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/toy_tokenizer.json");
  ModelExtras x;
  x.eos_token_ids = {3};
  const int32_t eos = tok.token_id("<eos>");
  ASSERT_GE(eos, 0);
  EXPECT_EQ(eos_ids(c, x, &tok), (std::vector<int32_t>{3, eos}));
  // tokenizer_config.json's eos_token too, once each.
  x.eos_token = std::string(tok.token(7));
  x.eos_token_ids = {eos};
  EXPECT_EQ(eos_ids(c, x, &tok), (std::vector<int32_t>{eos, 7}));
}

TEST(ModelFiles, SamplingDefaultsComeFromTheGenerationConfig) {
  ModelExtras x;
  const SamplingParams builtin;
  SamplingParams p = default_sampling(x);
  EXPECT_EQ(p.temperature, builtin.temperature);
  EXPECT_EQ(p.top_p, builtin.top_p);
  x.temperature = 0.6;
  x.top_p = 0.95;
  x.top_k = 20;
  x.min_p = 0.05;
  x.repetition_penalty = 1.2;
  p = default_sampling(x);
  EXPECT_EQ(p.temperature, 0.6);
  EXPECT_EQ(p.top_p, 0.95);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_EQ(p.min_p, 0.05);
  EXPECT_EQ(p.repetition_penalty, 1.2);
  x.do_sample = false;  // greedy, whatever the temperature says
  EXPECT_EQ(default_sampling(x).temperature, 0.0);
}

// The ZAYA1-8B-like directory (tests/chat_model_dir.h): sharded native weights load, generation
// stops at <|im_end|> and <eos>, sampling starts from its generation config.
TEST(ModelFiles, AZaya1ChatDirectoryGivesItsStopSetAndSampling) {
  const std::string& dir = test::zaya_chat_model_dir();
  if (dir.empty()) GTEST_SKIP() << test::gemma3_missing_message();
  EXPECT_TRUE(std::filesystem::exists(dir + "/model.safetensors.index.json"));
  const InferModel m = InferModel::load_dir(dir);
  const ModelExtras x = read_model_extras(dir);
  const Tokenizer tok = Tokenizer::load(find_tokenizer(dir, ""));
  EXPECT_EQ(tok.token_id("<|im_end|>"), 106);
  EXPECT_EQ(tok.token_id("<zyphra_tool_call>"), 101);
  EXPECT_EQ(tok.encode("<|im_start|>user\nhi<|im_end|>").front(), 105);
  EXPECT_EQ(eos_ids(m.config(), x, &tok), (std::vector<int32_t>{106, 1}));
  EXPECT_EQ(default_sampling(x).top_p, 0.95);
  EXPECT_EQ(choose_context(m.config(), x, 0).tokens, test::kZayaChatContext);
}

}  // namespace
}  // namespace zaya
