// read_model_extras (io/model_extras.h): tokenizer_config.json and generation_config.json as
// transformers and `zaya train` write them, absent files and fields, and a clear error naming the
// file (and key) for every malformed one.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "io/model_extras.h"
#include "test_util.h"

namespace zaya {
namespace {

using test::expect_error;
using test::ScratchDir;

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(ModelExtras, AbsentFilesGiveNothing) {
  ScratchDir dir;
  const ModelExtras x = read_model_extras(dir.path);
  EXPECT_EQ(x.tokenizer_config, "");
  EXPECT_EQ(x.generation_config, "");
  EXPECT_EQ(x.model_max_length, 0);
  EXPECT_EQ(x.bos_token, "");
  EXPECT_EQ(x.bos_token_id, -1);
  EXPECT_TRUE(x.eos_token_ids.empty());
  // Present but without the fields: the same.
  write(dir / "tokenizer_config.json", R"({"tokenizer_class": "PreTrainedTokenizerFast"})");
  write(dir / "generation_config.json", R"({"max_length": null, "bos_token_id": null})");
  const ModelExtras y = read_model_extras(dir.path);
  EXPECT_EQ(y.tokenizer_config, dir / "tokenizer_config.json");
  EXPECT_EQ(y.generation_config, dir / "generation_config.json");
  EXPECT_EQ(y.model_max_length, 0);
  EXPECT_EQ(y.bos_token_id, -1);
}

TEST(ModelExtras, ReadsWhatTheTrainerAndTransformersWrite) {
  ScratchDir dir;
  write(dir / "tokenizer_config.json",
        R"({"model_max_length": 128, "bos_token": "<bos>",
            "eos_token": {"content": "<eos>", "special": true, "lstrip": false}})");
  write(dir / "generation_config.json", R"({"bos_token_id": 2, "eos_token_id": 1})");
  ModelExtras x = read_model_extras(dir.path);
  EXPECT_EQ(x.model_max_length, 128);
  EXPECT_EQ(x.bos_token, "<bos>");
  EXPECT_EQ(x.eos_token, "<eos>");
  EXPECT_EQ(x.bos_token_id, 2);
  EXPECT_EQ(x.eos_token_ids, (std::vector<int64_t>{1}));
  // eos_token_id as a list (generation stops at any); ids written as floats by Python.
  write(dir / "generation_config.json", R"({"eos_token_id": [1, 106.0]})");
  EXPECT_EQ(read_model_extras(dir.path).eos_token_ids, (std::vector<int64_t>{1, 106}));
  // transformers' "no limit" (int(1e30), as an integer or a float) reads as not given.
  for (const char* big : {"1000000000000000019884624838656", "1e30", "18446744073709551615"}) {
    write(dir / "tokenizer_config.json", std::string(R"({"model_max_length": )") + big + "}");
    EXPECT_EQ(read_model_extras(dir.path).model_max_length, 0) << big;
  }
  write(dir / "tokenizer_config.json", R"({"model_max_length": 2048.0})");
  EXPECT_EQ(read_model_extras(dir.path).model_max_length, 2048);
}

TEST(ModelExtras, MalformedFilesNameTheFileAndKey) {
  ScratchDir dir;
  const std::string tc = dir / "tokenizer_config.json", gc = dir / "generation_config.json";
  auto expect_tc = [&](const std::string& text, std::initializer_list<std::string> parts) {
    write(tc, text);
    expect_error([&] { read_model_extras(dir.path); }, parts);
  };
  expect_tc(R"({"model_max_length": 12)", {tc, "not valid JSON"});
  expect_tc("[1, 2]", {tc, "must be a JSON object"});
  expect_tc(R"({"model_max_length": "128"})", {tc, "model_max_length", "\"128\""});
  expect_tc(R"({"model_max_length": 0})", {tc, "model_max_length", "positive integer"});
  expect_tc(R"({"model_max_length": -5})", {tc, "model_max_length"});
  expect_tc(R"({"model_max_length": 12.5})", {tc, "model_max_length"});
  expect_tc(R"({"bos_token": 2})", {tc, "bos_token"});
  expect_tc(R"({"eos_token": {"text": "<eos>"}})", {tc, "eos_token"});
  write(tc, "{}");
  auto expect_gc = [&](const std::string& text, std::initializer_list<std::string> parts) {
    write(gc, text);
    expect_error([&] { read_model_extras(dir.path); }, parts);
  };
  expect_gc("{", {gc, "not valid JSON"});
  expect_gc(R"({"eos_token_id": "1"})", {gc, "eos_token_id", "token id"});
  expect_gc(R"({"eos_token_id": [1, -2]})", {gc, "eos_token_id", "-2"});
  expect_gc(R"({"eos_token_id": []})", {gc, "eos_token_id", "empty"});
  expect_gc(R"({"eos_token_id": 1e300})", {gc, "eos_token_id"});
  expect_gc(R"({"bos_token_id": 1.5})", {gc, "bos_token_id"});
  expect_gc(R"({"bos_token_id": 4294967296})", {gc, "bos_token_id"});
  expect_gc(R"({"do_sample": "yes"})", {gc, "do_sample", "true or false"});
  expect_gc(R"({"temperature": -1})", {gc, "temperature", "-1"});
  expect_gc(R"({"top_p": 0})", {gc, "top_p", "above 0"});
  expect_gc(R"({"top_p": 1.5})", {gc, "top_p"});
  expect_gc(R"({"top_k": 2.5})", {gc, "top_k", "integer"});
  expect_gc(R"({"min_p": "0.1"})", {gc, "min_p"});
  expect_gc(R"({"repetition_penalty": 0})", {gc, "repetition_penalty"});
}

TEST(ModelExtras, ReadsTheSamplingDefaultsOfGenerationConfig) {
  ScratchDir dir;
  write(dir / "generation_config.json",
        R"({"eos_token_id": [106, 1], "do_sample": true, "temperature": 0.6, "top_p": 0.95,
            "top_k": 20, "min_p": 0.0, "repetition_penalty": 1.1})");
  const ModelExtras x = read_model_extras(dir.path);
  EXPECT_EQ(x.eos_token_ids, (std::vector<int64_t>{106, 1}));
  EXPECT_EQ(x.do_sample, true);
  EXPECT_EQ(x.temperature, 0.6);
  EXPECT_EQ(x.top_p, 0.95);
  EXPECT_EQ(x.top_k, 20);
  EXPECT_EQ(x.min_p, 0.0);
  EXPECT_EQ(x.repetition_penalty, 1.1);
  write(dir / "generation_config.json", R"({"temperature": null})");
  const ModelExtras y = read_model_extras(dir.path);
  EXPECT_FALSE(y.temperature.has_value());
  EXPECT_FALSE(y.do_sample.has_value());
}

}  // namespace
}  // namespace zaya
