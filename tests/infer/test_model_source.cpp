// infer/model_source: a GGUF file is a whole model. The ZAYA1-8B-like tiny model directory of the
// chat tests (tests/chat_model_dir.h, with the real Gemma 3 tokenizer) and the same model written
// as one GGUF file (tests/gguf_model_file.h) open to the same config, extras, tokenizer and chat
// template, and their weights give the same logits — bit for bit from F32, and from BF16 as the
// directory rounded to BF16 at load gives them; a file with only the GGML keys (the vocabulary
// arrays, the special ids) gives the same ids and special tokens; a file without a tokenizer says
// so naming the file until --tokenizer names one; a truncated file and another architecture's are
// errors naming the file. InferModel::load picks the loader from the path, and reports the
// dominant matrix dtype and the bytes it holds. Files as the community converters write them
// (tests/gguf_community.h, both namings) run as the directory too, and their SentencePiece-style
// token list without merges is no tokenizer, said so. Messages about a GGUF file's config name the
// file and the key the value came from, not config.json.
#include "infer/model_source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "chat_model_dir.h"
#include "checkpoint/model_path.h"
#include "data/tokenizer.h"
#include "gguf_community.h"
#include "gguf_model_file.h"
#include "infer/cache.h"
#include "infer/decoder.h"
#include "infer/infer_model.h"
#include "infer/model_files.h"
#include "infer/whole_model_dir.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

namespace fs = std::filesystem;

const std::vector<int32_t> kPrompt = {2, 105, 2364, 107, 9259, 236764, 1217, 659, 611, 236881};

// The logits of the last prompt token.
std::vector<float> last_logits(const InferModel& m) {
  SequenceCache cache(m.config(), 32);
  Decoder dec(m);
  const int64_t V = m.config().vocab_size;
  std::vector<float> out(static_cast<size_t>(V));
  const DecodeItem item{&cache, kPrompt};
  dec.forward(std::span<const DecodeItem>(&item, 1), Tensor(out.data(), {1, V}));
  return out;
}

// One GGUF file of the chat model directory per options, written once per test process.
const std::string& gguf_of(const GgufFileOptions& o, const std::string& name) {
  static ScratchDir dir;
  static std::map<std::string, std::string> files;
  auto [it, fresh] = files.emplace(name, dir / (name + ".gguf"));
  if (fresh) write_model_gguf(zaya_chat_model_dir(), it->second, o);
  return it->second;
}

const std::string& f32_gguf() {
  return gguf_of({}, "f32");
}

const nlohmann::ordered_json kMessages = nlohmann::ordered_json::parse(
    R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}])");

#define NEED_CHAT_MODEL() \
  if (zaya_chat_model_dir().empty()) GTEST_SKIP() << gemma3_missing_message()

}  // namespace

TEST(ModelSource, GgufFileIsTheSameModelAsItsDirectory) {
  NEED_CHAT_MODEL();
  const ModelSource dir = open_model_source(zaya_chat_model_dir());
  const ModelSource gg = open_model_source(f32_gguf());
  EXPECT_FALSE(dir.is_gguf());
  ASSERT_TRUE(gg.is_gguf());
  EXPECT_EQ(gg.path, f32_gguf());
  EXPECT_EQ(gg.name, "f32");
  EXPECT_EQ(gg.config_origin, f32_gguf() + " (zaya.config_json)");
  EXPECT_EQ(config_to_json(gg.config), config_to_json(dir.config));

  // The extras, from the embedded texts.
  const ModelExtras &a = dir.extras, &b = gg.extras;
  EXPECT_EQ(b.tokenizer_config, f32_gguf() + " (zaya.tokenizer_config_json)");
  EXPECT_EQ(b.generation_config, f32_gguf() + " (zaya.generation_config_json)");
  EXPECT_EQ(b.model_max_length, a.model_max_length);
  EXPECT_EQ(b.bos_token, a.bos_token);
  EXPECT_EQ(b.eos_token, a.eos_token);
  EXPECT_EQ(b.bos_token_id, a.bos_token_id);
  EXPECT_EQ(b.eos_token_ids, a.eos_token_ids);
  EXPECT_EQ(b.do_sample, a.do_sample);
  EXPECT_EQ(b.top_p, a.top_p);

  // The tokenizer (exact: zaya.tokenizer_json) and the chat template.
  const SourceTokenizer ta = dir.require_tokenizer(""), tb = gg.require_tokenizer("");
  EXPECT_EQ(tb.origin, f32_gguf() + " (zaya.tokenizer_json)");
  const std::string text = "Hello  world\n\n<|im_start|>user\nÜber 🤗 — 12345";
  EXPECT_EQ(tb.tok->encode(text), ta.tok->encode(text));
  const chat::ChatTemplate ca = dir.chat_template("", ta.tok.get());
  const chat::ChatTemplate cb = gg.chat_template("", tb.tok.get());
  EXPECT_EQ(cb.format, chat::ChatFormat::ModelTemplate);
  EXPECT_EQ(cb.origin, f32_gguf() + " (tokenizer.chat_template)");
  const nlohmann::ordered_json none = nlohmann::ordered_json::object();
  EXPECT_EQ(cb.render(kMessages, nullptr, true, none), ca.render(kMessages, nullptr, true, none));

  // The weights: the same logits, bit for bit.
  const InferModel ma = dir.load_weights(), mb = gg.load_weights();
  EXPECT_EQ(mb.source(), f32_gguf());
  EXPECT_EQ(mb.matrix_dtype(), DType::F32);
  EXPECT_EQ(mb.total_weight_bytes(), ma.total_weight_bytes());
  EXPECT_EQ(mb.dense_weight_bytes(), ma.dense_weight_bytes());
  EXPECT_EQ(mb.active_weight_bytes(), ma.active_weight_bytes());
  EXPECT_EQ(last_logits(mb), last_logits(ma));
}

TEST(ModelSource, Bf16GgufRunsAsTheDirectoryRoundedToBf16) {
  NEED_CHAT_MODEL();
  const InferModel dir = InferModel::load(zaya_chat_model_dir(), /*to_bf16=*/true);
  const InferModel bf16 = InferModel::load(gguf_of({.matrix = DType::BF16}, "bf16"));
  const InferModel rounded = InferModel::load(f32_gguf(), /*to_bf16=*/true);
  EXPECT_EQ(bf16.matrix_dtype(), DType::BF16);
  EXPECT_EQ(rounded.matrix_dtype(), DType::BF16);
  // The GGUF's BF16 conv weights are widened to F32 (2 more bytes per value than the
  // directory's BF16 ones); everything else is the same bytes.
  int64_t conv_values = 0;
  for (const ParamSpec& s : make_param_layout(dir.config()).specs)
    if (s.kind == ParamKind::Conv) conv_values += s.numel();
  EXPECT_GT(conv_values, 0);
  EXPECT_EQ(bf16.total_weight_bytes(), dir.total_weight_bytes() + 2 * conv_values);
  EXPECT_EQ(rounded.total_weight_bytes(), bf16.total_weight_bytes());
  EXPECT_EQ(bf16.active_weight_bytes() - bf16.dense_weight_bytes(),
            dir.active_weight_bytes() - dir.dense_weight_bytes());
  const std::vector<float> want = last_logits(dir), got = last_logits(bf16);
  EXPECT_EQ(last_logits(rounded), got);
  float scale = 0;
  for (float x : want) scale = std::max(scale, std::abs(x));
  for (size_t v = 0; v < want.size(); ++v)
    ASSERT_NEAR(got[v], want[v], kModelLogitRel * scale) << "logit " << v;
  EXPECT_EQ(std::max_element(got.begin(), got.end()) - got.begin(),
            std::max_element(want.begin(), want.end()) - want.begin());
}

TEST(ModelSource, GgmlKeysOnlyGiveTheSameTokensAndSpecialIds) {
  NEED_CHAT_MODEL();
  const std::string& path =
      gguf_of({.tokenizer = GgufTokenizerKind::GgmlArrays, .embedded_extras = false}, "ggml_keys");
  const ModelSource dir = open_model_source(zaya_chat_model_dir());
  const ModelSource gg = open_model_source(path);
  const ModelExtras& x = gg.extras;
  EXPECT_EQ(x.generation_config, path + " (tokenizer.ggml.*)");
  EXPECT_EQ(x.bos_token_id, 2);
  EXPECT_EQ(x.eos_token_ids, std::vector<int64_t>{106});
  EXPECT_EQ(x.bos_token, "<bos>");
  EXPECT_EQ(x.eos_token, "<|im_end|>");
  EXPECT_EQ(x.model_max_length, gg.config.max_position_embeddings);  // zaya.context_length
  EXPECT_EQ(x.tokenizer_config, path + " (zaya.context_length)");
  EXPECT_FALSE(x.do_sample.has_value());

  const SourceTokenizer ta = dir.require_tokenizer(""), tb = gg.require_tokenizer("");
  EXPECT_EQ(tb.origin, path + " (tokenizer.ggml.*)");
  for (const std::string text :
       {"Hello  world", "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
        "  indented\tcode();\n\n\n",
        "日本語のテキスト, émoji 🤗🤗, <bos> and <start_of_image>"}) {
    EXPECT_EQ(tb.tok->encode(text), ta.tok->encode(text)) << text;
    EXPECT_EQ(tb.tok->decode(ta.tok->encode(text)), text);
  }
  const chat::ChatTemplate ca = dir.chat_template("", ta.tok.get());
  const chat::ChatTemplate cb = gg.chat_template("", tb.tok.get());
  EXPECT_EQ(cb.bos_token, ca.bos_token);
  EXPECT_EQ(cb.eos_token, ca.eos_token);
  const nlohmann::ordered_json none = nlohmann::ordered_json::object();
  EXPECT_EQ(cb.render(kMessages, nullptr, true, none), ca.render(kMessages, nullptr, true, none));
}

TEST(ModelSource, NoTokenizerUntilTokenizerFlag) {
  NEED_CHAT_MODEL();
  const std::string& path = gguf_of({.tokenizer = GgufTokenizerKind::None}, "no_tokenizer");
  const ModelSource gg = open_model_source(path);
  const SourceTokenizer none = gg.load_tokenizer("");
  EXPECT_FALSE(none.tok);
  EXPECT_NE(none.why_not.find("zaya.tokenizer_json"), std::string::npos) << none.why_not;
  expect_error([&] { gg.require_tokenizer("", "use --prompt-ids"); },
               {path, "this GGUF has no tokenizer zaya can read", "tokenizer.ggml.tokens",
                "pass --tokenizer", "use --prompt-ids"});
  const std::string flag = zaya_chat_model_dir() + "/tokenizer.json";
  const SourceTokenizer given = gg.require_tokenizer(flag);
  ASSERT_TRUE(given.tok);
  EXPECT_EQ(given.origin, flag);
}

TEST(ModelSource, BrokenAndForeignFilesNameTheFile) {
  NEED_CHAT_MODEL();
  ScratchDir dir;
  // The first half of a good file.
  const std::string cut = dir / "cut.gguf";
  {
    std::ifstream in(f32_gguf(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  expect_error([&] { open_model_source(cut); }, {cut});
  expect_error([&] { InferModel::load(cut); }, {cut});
  // Another architecture's file, named without .gguf: still read as a GGUF (its magic).
  const std::string llama = dir / "llama.bin";
  {
    GgufWriter w(llama);
    w.set("general.architecture", GgufValue::str("llama"));
    w.finish();
  }
  EXPECT_TRUE(is_gguf_file(llama));
  expect_error([&] { open_model_source(llama); }, {llama, "'llama', not 'zaya'"});
  // zaya convert's kind of argument: resolve_model_path says it is a GGUF file, reads nothing.
  const ModelPath mp = resolve_model_path(llama);
  EXPECT_EQ(mp.gguf, llama);
  EXPECT_EQ(mp.dir, "");
  EXPECT_EQ(mp.name, "llama");
}

TEST(ModelSource, CommunityFilesRunAsTheirDirectory) {
  NEED_CHAT_MODEL();
  ScratchDir d;
  const Model model = Model::load_dir(zaya_chat_model_dir());
  const std::vector<float> want = last_logits(InferModel::load(zaya_chat_model_dir()));
  for (const CommunityScheme scheme : {CommunityScheme::A, CommunityScheme::B}) {
    const std::string path = d / (scheme == CommunityScheme::A ? "a.gguf" : "b.gguf");
    write_community_gguf(path, model, scheme, {.tokens = {"<pad>", "<eos>", "<bos>"}});
    const ModelSource src = open_model_source(path);
    EXPECT_EQ(src.config_origin, path + " (its zaya.* keys and tensor shapes)");
    EXPECT_EQ(last_logits(src.load_weights()), want) << path;
    const SourceTokenizer t = src.load_tokenizer("");
    EXPECT_FALSE(t.tok);
    EXPECT_NE(t.why_not.find("no tokenizer.ggml.merges"), std::string::npos) << t.why_not;
  }
}

// The context and vocabulary limits of a GGUF file are named by the file and its key: zaya's own
// files (zaya.config_json) and the community's (zaya.context_length, token_embd.weight's rows); a
// directory's by config.json.
TEST(ModelSource, GgufConfigMessagesNameTheFileAndTheKey) {
  ScratchDir dir;
  const std::string model = dir / "model", own = dir / "own.gguf", theirs = dir / "theirs.gguf";
  save_whole_model_dir(model, 512);
  write_model_gguf(model, own);
  write_community_gguf(theirs, tiny_toy_model(), CommunityScheme::B, {});
  auto past_context = [](const ModelSource& s) {
    return error_of(
        [&] { (void)choose_context(s.config, s.extras, s.config.max_position_embeddings + 1); });
  };
  auto bos_past_vocab = [](const ModelSource& s) {
    ModelExtras x = s.extras;
    x.bos_token_id = s.config.vocab_size;
    return error_of([&] { (void)bos_id(s.config, x, nullptr); });
  };
  const ModelSource a = open_model_source(own), b = open_model_source(theirs),
                    d = open_model_source(model);
  std::string msg = past_context(a);
  expect_contains(msg, own + " zaya.config_json max_position_embeddings");
  EXPECT_EQ(msg.find("(config.json"), std::string::npos) << msg;
  expect_contains(bos_past_vocab(a), own + " zaya.config_json vocab_size");
  msg = past_context(b);
  expect_contains(msg, theirs + " zaya.context_length");
  EXPECT_EQ(msg.find("config.json"), std::string::npos) << msg;
  msg = bos_past_vocab(b);
  expect_contains(msg, theirs + " token_embd.weight ne[1]");
  EXPECT_EQ(msg.find("config.json"), std::string::npos) << msg;
  expect_contains(past_context(d), "(config.json max_position_embeddings)");
  expect_contains(bos_past_vocab(d), "(config.json vocab_size)");
}
