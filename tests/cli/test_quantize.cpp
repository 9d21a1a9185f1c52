// `zaya quantize` end to end (src/cli/quantize.cpp): a ZAYA1-8B-like directory (the real Gemma 3
// tokenizer, hidden 64) and a model of 256-wide rows (where the K types fit) written as GGUF. The
// files' tensor types follow the mixed policy (quant/policy.h), --blanket and --keep; the texts a
// model needs are embedded; every tensor dequantizes to within its type's error of the original;
// a GGUF source gives the same file as its directory; the size and bits per weight are printed;
// bad flags are one clear error line. The tokenizer.ggml.* arrays beside zaya.tokenizer_json
// rebuild, alone, the tokenizer (toy and Gemma 3) with its special ids; a GGUF source is known by
// its magic whatever its name, and a file that is neither is an error naming it.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "chat_model_dir.h"
#include "cli_util.h"
#include "data/tokenizer.h"
#include "data/tokenizer_gguf.h"
#include "gemma3_tokenizer.h"
#include "gguf_community.h"
#include "infer/gguf_model.h"
#include "infer/model_files.h"
#include "infer/model_source.h"
#include "infer/whole_model_dir.h"
#include "io/gguf.h"
#include "io/model_dir.h"
#include "model/model.h"
#include "quant/formats.h"
#include "quant/policy.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

fs::path scratch(const std::string& name) {
  fs::path p =
      fs::path(::testing::TempDir()) / ("zaya_quantize_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

CliResult run(const std::string& args) {
  return run_zaya_in(scratch("run").string(), args);
}

// A model whose rows are all multiples of 256 (hidden 512, so the attention output's rows — half
// the hidden width in CCA — are 256; 8 query heads of 32, expert width 256, router width 256; the
// toy tokenizer's 1024 tokens; 2 experts): two attention + MoE pairs, so the _m split
// has two MoE sub-layers to choose from.
Model wide_model() {
  json j = zaya_chat_config_json();
  j["hidden_size"] = 512;
  j["head_dim"] = 32;
  j["num_attention_heads"] = 8;
  j["moe_intermediate_size"] = 256;
  j["router_hidden_size"] = 256;
  j["vocab_size"] = 1024;
  j["num_experts"] = 2;
  Model m(config_from_json(j));
  m.init_random(5, 0.2);
  return m;
}

const std::string& wide_model_dir() {
  static const std::string dir = [] {
    const std::string d = scratch("wide_model").string();
    wide_model().save_dir(d);
    add_model_extras(d, 512);
    return d;
  }();
  return dir;
}

// Quantizes `model` into OUT/NAME.gguf (one folder per test process) with `flags`; the run must
// succeed.
std::string quantize(const std::string& model, const std::string& name, const std::string& flags,
                     CliResult* result = nullptr) {
  static const fs::path dir = scratch("out");
  const std::string out = (dir / (name + ".gguf")).string();
  const CliResult r = run("quantize --model " + model + " --out " + out + " " + flags);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(r.crashed);
  if (result) *result = r;
  return out;
}

std::map<std::string, DType> types_of(const GgufFile& f) {
  std::map<std::string, DType> m;
  for (const GgufTensor& t : f.tensors()) m[t.name] = t.dtype;
  return m;
}

// The largest relative RMS error a type may have on weights drawn from a normal distribution:
// half a quantization step over the block's range, with room (docs/quantization.md).
double type_bound(DType t) {
  switch (t) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1e-3;
    case DType::Q8_0:
      return 0.01;
    case DType::Q6_K:
      return 0.03;
    case DType::Q5_0:
    case DType::Q5_K:
      return 0.06;
    default:
      return 0.12;
  }
}

// Every parameter of the GGUF at `gguf` against the model directory `dir` it came from: the
// relative RMS error of its dequantized values within its type's bound (F32 exact).
void expect_within_type_error(const std::string& dir, const std::string& gguf) {
  const ZayaConfig c = load_config(dir + "/config.json");
  const SafeTensors st = open_model_tensors(dir, c);
  const GgufModel gm = open_gguf_model(gguf);
  for (const ParamSpec& s : make_param_layout(c).specs) {
    std::vector<float> want(size_t(s.numel())), got(size_t(s.numel()));
    Tensor w(want.data(), {s.numel()});
    w.ndim = int(s.shape.size());
    for (int k = 0; k < w.ndim; ++k) w.shape[size_t(k)] = s.shape[size_t(k)];
    st.read_into(s.name, w);
    const Tensor q = gm.tensor(s);
    const int64_t cols = s.shape.back();
    quant::dequantize_matrix(q.dtype, q.data, got.data(), s.numel() / cols, cols);
    double err = 0, norm = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
      norm += double(want[i]) * want[i];
    }
    const double rel = norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
    EXPECT_LE(rel, type_bound(q.dtype)) << s.name << " as " << dtype_name(q.dtype);
  }
}

// `in` written again to `out` without the metadata keys `drop` (the tensors byte for byte).
void rewrite_without(const std::string& in, const std::string& out,
                     const std::set<std::string>& drop) {
  const GgufFile f = GgufFile::open(in);
  GgufWriter w(out);
  for (const auto& [k, v] : f.metadata())
    if (!drop.count(k) && k != "general.alignment") w.set(k, v);
  for (const GgufTensor& t : f.tensors()) w.add_tensor(t.name, t.dtype, t.ne);
  for (const GgufTensor& t : f.tensors()) w.write_tensor(t.name, t.data, t.nbytes);
  w.finish();
}

// Model directory `dir` quantized, then stripped of zaya.tokenizer_json and the embedded configs:
// the GGML arrays alone rebuild a tokenizer that encodes and decodes the corpus (and specials,
// byte fallbacks, invalid UTF-8) as the directory's tokenizer.json, the GGML ids give the
// directory's BOS and EOS, and the stripped file generates what the whole file generates.
void expect_arrays_alone_rebuild(const std::string& dir, const std::string& name) {
  const std::string out = quantize(dir, name, "--type q8_0");
  const ZayaConfig c = load_config(dir + "/config.json");
  {
    const GgufFile f = GgufFile::open(out);
    ASSERT_NE(f.find("zaya.tokenizer_json"), nullptr);
    ASSERT_NE(f.find("tokenizer.ggml.tokens"), nullptr) << "no arrays written";
    EXPECT_EQ(f.find("tokenizer.ggml.tokens")->items.size(), size_t(c.vocab_size));
    EXPECT_EQ(f.get_str("tokenizer.ggml.model"), "gemma4");
  }
  const std::string stripped = (scratch(name) / "stripped.gguf").string();
  rewrite_without(
      out, stripped,
      {"zaya.tokenizer_json", "zaya.tokenizer_config_json", "zaya.generation_config_json"});
  const ModelSource d = open_model_source(dir), s = open_model_source(stripped);
  const SourceTokenizer td = d.require_tokenizer(""), ts = s.require_tokenizer("");
  EXPECT_EQ(ts.origin, stripped + " (tokenizer.ggml.*)");
  std::vector<std::string> docs = gemma3_corpus();
  ASSERT_GT(docs.size(), 100u);
  docs.push_back(
      "<bos>Hi  there\n\n\t<start_of_turn>user \xe2\x96\x81\xe2\x96\x81x \xff 🤗<eos>");
  for (size_t i = 0; i < docs.size(); ++i) {
    const std::vector<int32_t> ids = td.tok->encode(docs[i]);
    ASSERT_EQ(ts.tok->encode(docs[i]), ids) << "document " << i << ": " << docs[i].substr(0, 200);
    ASSERT_EQ(ts.tok->decode(ids), td.tok->decode(ids)) << "document " << i;
  }
  EXPECT_EQ(ts.tok->vocab_size(), td.tok->vocab_size());
  EXPECT_EQ(s.extras.generation_config, stripped + " (tokenizer.ggml.*)");
  EXPECT_EQ(s.extras.bos_token_id, d.extras.bos_token_id);
  EXPECT_EQ(s.extras.eos_token_ids, d.extras.eos_token_ids);
  EXPECT_EQ(bos_id(s.config, s.extras, ts.tok.get()), bos_id(d.config, d.extras, td.tok.get()));
  std::vector<int32_t> es = eos_ids(s.config, s.extras, ts.tok.get()),
                       ed = eos_ids(d.config, d.extras, td.tok.get());
  std::sort(es.begin(), es.end());
  std::sort(ed.begin(), ed.end());
  EXPECT_EQ(es, ed);
  const std::string gen =
      " --prompt \"The capital of France\" --max-new-tokens 6 --temperature 0 --quiet";
  const CliResult a = run("generate --model " + out + gen),
                  b = run("generate --model " + stripped + gen);
  EXPECT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(b.code, 0) << b.err;
  EXPECT_FALSE(a.out.empty());
  EXPECT_EQ(b.out, a.out);
}

}  // namespace

// The toy tokenizer (committed) through the GGML arrays alone.
TEST(CliQuantize, ToyTokenizerFromTheArraysAlone) {
  expect_arrays_alone_rebuild(wide_model_dir(), "arrays_toy");
}

// The real Gemma 3 tokenizer (with ZAYA's special tokens, padded to ZAYA1's 262,272 ids) through
// the GGML arrays alone.
TEST(CliQuantize, Gemma3TokenizerFromTheArraysAlone) {
  const std::string& dir = zaya_chat_model_dir();
  if (dir.empty()) GTEST_SKIP() << gemma3_missing_message();
  expect_arrays_alone_rebuild(dir, "arrays_gemma3");
}

// GGUF or directory is the file's magic, not its name: a GGUF file named model.bin quantizes as
// the .gguf it is; a file of another kind outside a model directory, and a .gguf that is not one,
// are one error line naming the path.
TEST(CliQuantize, GgufIsKnownByItsMagic) {
  const std::string dir = wide_model_dir();
  const std::string f32 = quantize(dir, "magic_f32", "--type q8_0 --keep '.*=f32'");
  const fs::path s = scratch("magic");
  const std::string bin = (s / "model.bin").string();
  fs::copy_file(f32, bin);
  const GgufFile direct = GgufFile::open(quantize(f32, "magic_direct", "--type q8_0"));
  const GgufFile via = GgufFile::open(quantize(bin, "magic_via", "--type q8_0"));
  ASSERT_EQ(via.tensors().size(), direct.tensors().size());
  for (size_t i = 0; i < via.tensors().size(); ++i) {
    const GgufTensor &a = direct.tensors()[i], &b = via.tensors()[i];
    ASSERT_EQ(a.nbytes, b.nbytes) << a.name;
    EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0) << a.name;
  }
  const std::string out = (s / "out.gguf").string();
  const std::string notes = (s / "notes.txt").string();
  std::ofstream(notes) << "not a model";
  CliResult r = run("quantize --model " + notes + " --type q8_0 --out " + out);
  expect_user_error(r, notes);
  expect_contains(r.err, "not a GGUF file");
  const std::string fake = (s / "fake.gguf").string();
  std::ofstream(fake) << "GGML and more bytes than a magic";
  r = run("quantize --model " + fake + " --type q8_0 --out " + out);
  expect_user_error(r, fake);
  expect_contains(r.err, "not a GGUF file");
  EXPECT_FALSE(fs::exists(out));
}

// The ZAYA1-8B-like directory at q4_k_m: rows of 64 hold no K block, so attention and experts
// fall back to Q5_0 (and say so); the policy's Q8_0/F16/F32 choices stand; every text is embedded.
TEST(CliQuantize, ChatModelDirectoryAtQ4KM) {
  const std::string& dir = zaya_chat_model_dir();
  if (dir.empty()) GTEST_SKIP() << gemma3_missing_message();
  CliResult r;
  const std::string out = quantize(dir, "chat_q4km", "--type q4_k_m", &r);
  const GgufFile f = GgufFile::open(out);
  const auto types = types_of(f);
  EXPECT_EQ(types.at("token_embd.weight"), DType::Q8_0);
  EXPECT_EQ(types.at("blk.0.attn_q.weight"), DType::Q5_0);
  EXPECT_EQ(types.at("blk.0.attn_output.weight"), DType::Q5_0);  // rows of 32
  EXPECT_EQ(types.at("blk.0.ssm_conv1d.weight"), DType::F16);
  EXPECT_EQ(types.at("blk.0.cca_conv_grp.weight"), DType::F16);
  EXPECT_EQ(types.at("blk.0.attn_norm.weight"), DType::F32);
  EXPECT_EQ(types.at("blk.1.ffn_gate_inp.weight"), DType::Q8_0);
  EXPECT_EQ(types.at("blk.1.zaya_router_mlp4.weight"), DType::Q8_0);
  EXPECT_EQ(types.at("blk.1.zaya_router_biases.weight"), DType::F32);
  EXPECT_EQ(types.at("blk.1.ffn_gate_up_exps.weight"), DType::Q5_0);
  expect_contains(r.err, "blk.0.attn_q.weight: rows of 64 do not fill Q4_K's blocks of 256: Q5_0");

  // The texts, byte for byte.
  EXPECT_EQ(f.get_str("zaya.tokenizer_json"), slurp(dir + "/tokenizer.json"));
  EXPECT_EQ(f.get_str("zaya.tokenizer_config_json"), slurp(dir + "/tokenizer_config.json"));
  EXPECT_EQ(f.get_str("zaya.generation_config_json"), slurp(dir + "/generation_config.json"));
  EXPECT_EQ(f.get_str("tokenizer.chat_template"), slurp(dir + "/chat_template.jinja"));
  const ZayaConfig c = config_from_json(json::parse(f.get_str("zaya.config_json")));
  EXPECT_EQ(c.vocab_size, 262272);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(f.get_int("general.file_type"), 15);
  EXPECT_EQ(f.get_int("general.quantization_version"), 2);
  EXPECT_EQ(f.get_str("general.architecture"), "zaya");

  // The summary: a line per type, the file's size, the bits per weight.
  expect_contains(r.out, "Q8_0");
  expect_contains(r.out, "Q5_0");
  expect_contains(
      r.out, "file " + [&] {
        std::string s = std::to_string(fs::file_size(out)), g;
        for (size_t i = 0; i < s.size(); ++i) {
          if (i > 0 && (s.size() - i) % 3 == 0) g += ',';
          g += s[i];
        }
        return g;
      }() + " bytes");
  expect_contains(r.out, "bits per weight");
  expect_within_type_error(dir, out);
}

// Rows of 256: every preset's K types, the _m split and the Q8_0 router / embedding.
TEST(CliQuantize, PresetsOnWideModel) {
  const std::string dir = wide_model_dir();
  struct Case {
    const char* word;
    DType base;
    bool m;
    int64_t file_type;
  };
  for (const Case& k :
       {Case{"q8_0", DType::Q8_0, false, 7}, Case{"q6_k", DType::Q6_K, false, 18},
        Case{"q5_k_m", DType::Q5_K, true, 17}, Case{"q4_k_m", DType::Q4_K, true, 15}}) {
    SCOPED_TRACE(k.word);
    CliResult r;
    const std::string out =
        quantize(dir, std::string("wide_") + k.word, std::string("--type ") + k.word, &r);
    const GgufFile f = GgufFile::open(out);
    const auto types = types_of(f);
    EXPECT_EQ(f.get_int("general.file_type"), k.file_type);
    EXPECT_EQ(types.at("token_embd.weight"), DType::Q8_0);
    EXPECT_EQ(types.at("blk.1.ffn_gate_inp.weight"), DType::Q8_0);
    EXPECT_EQ(types.at("blk.3.ffn_gate.weight"), DType::Q8_0);
    for (const char* n : {"blk.0.attn_q.weight", "blk.2.attn_k.weight", "blk.0.attn_output.weight",
                          "blk.1.ffn_gate_up_exps.weight", "blk.3.ffn_gate_up_exps.weight"})
      EXPECT_EQ(types.at(n), k.base) << n;
    // Of two layers use_more_bits picks the second: its down and value projections go to Q6_K.
    EXPECT_EQ(types.at("blk.1.ffn_down_exps.weight"), k.base);
    EXPECT_EQ(types.at("blk.3.ffn_down_exps.weight"), k.m ? DType::Q6_K : k.base);
    EXPECT_EQ(types.at("blk.0.cca_val_proj1.weight"), k.base);
    EXPECT_EQ(types.at("blk.2.cca_val_proj2.weight"), k.m ? DType::Q6_K : k.base);
    EXPECT_EQ(types.at("blk.2.ssm_conv1d.weight"), DType::F16);
    EXPECT_EQ(r.err.find("do not fill"), std::string::npos) << "no fallbacks: " << r.err;
    expect_within_type_error(dir, out);
    // What `zaya inspect` says the preset's file holds is what it holds.
    uint64_t tensor_bytes = 0;
    for (const GgufTensor& t : f.tensors()) tensor_bytes += t.nbytes;
    quant::PolicyOptions o;
    o.preset = *parse_enum<quant::QuantPreset>(k.word);
    EXPECT_EQ(gguf_weight_bytes(load_config(dir + "/config.json"), o), tensor_bytes);
  }
}

TEST(CliQuantize, BlanketAndKeep) {
  const std::string dir = wide_model_dir();
  const GgufFile b = GgufFile::open(quantize(dir, "blanket", "--type q4_k_m --blanket"));
  auto types = types_of(b);
  EXPECT_EQ(types.at("token_embd.weight"), DType::Q4_K);
  EXPECT_EQ(types.at("blk.1.ffn_gate_inp.weight"), DType::Q4_K);
  EXPECT_EQ(types.at("blk.3.ffn_down_exps.weight"), DType::Q4_K);  // no _m split
  EXPECT_EQ(types.at("blk.0.ssm_conv1d.weight"), DType::F16);      // rows of 2: no block fits
  EXPECT_EQ(types.at("blk.0.attn_norm.weight"), DType::F32);
  // The blanket file is smaller than the policy's.
  const std::string policy = quantize(dir, "policy", "--type q4_k_m");
  EXPECT_LT(b.file_bytes(), fs::file_size(policy));

  const GgufFile k =
      GgufFile::open(quantize(dir, "keep",
                              "--type q4_k_m --keep 'ffn_gate_up_exps=q5_k' --keep 'exps=q8_0' "
                              "--keep '^token_embd\\.weight$=iq4_xs' --keep 'cca_conv_grp=f32'"));
  types = types_of(k);
  EXPECT_EQ(types.at("blk.1.ffn_gate_up_exps.weight"), DType::Q5_K);  // the first rule
  EXPECT_EQ(types.at("blk.1.ffn_down_exps.weight"), DType::Q8_0);
  EXPECT_EQ(types.at("blk.3.ffn_down_exps.weight"), DType::Q8_0);
  EXPECT_EQ(types.at("token_embd.weight"), DType::IQ4_XS);
  EXPECT_EQ(types.at("blk.0.cca_conv_grp.weight"), DType::F32);
  EXPECT_EQ(types.at("blk.0.attn_q.weight"), DType::Q4_K);  // no rule: the policy
  expect_within_type_error(dir, k.path());
}

// A GGUF source: an all-F32 GGUF (every matrix kept f32) quantized again gives the directory's
// q4_k_m file tensor for tensor; a quantized source is requantized with a warning, or copied as it
// is where the type stays.
TEST(CliQuantize, FromGguf) {
  const std::string dir = wide_model_dir();
  const std::string f32 = quantize(dir, "f32", "--type q8_0 --keep '.*=f32'");
  EXPECT_EQ(types_of(GgufFile::open(f32)).at("token_embd.weight"), DType::F32);
  const GgufFile direct = GgufFile::open(quantize(dir, "direct", "--type q4_k_m"));
  CliResult r;
  const GgufFile via = GgufFile::open(quantize(f32, "via", "--type q4_k_m", &r));
  EXPECT_EQ(r.err.find("requantizing"), std::string::npos) << r.err;
  ASSERT_EQ(direct.tensors().size(), via.tensors().size());
  for (size_t i = 0; i < direct.tensors().size(); ++i) {
    const GgufTensor &a = direct.tensors()[i], &b = via.tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.dtype, b.dtype) << a.name;
    ASSERT_EQ(a.nbytes, b.nbytes) << a.name;
    EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0) << a.name;
  }
  EXPECT_EQ(via.get_str("zaya.tokenizer_json"), slurp(dir + "/tokenizer.json"));
  EXPECT_EQ(via.get_str("zaya.generation_config_json"),
            direct.get_str("zaya.generation_config_json"));

  // q4_k_m → q8_0: the Q4_K/Q6_K tensors are requantized (a warning); Q8_0 and F32 ones copied.
  const GgufFile again = GgufFile::open(quantize(direct.path(), "again", "--type q8_0", &r));
  expect_contains(r.err, "requantizing Q4_K loses quality");
  expect_contains(r.err, "requantizing Q6_K loses quality");
  const GgufTensor* e0 = direct.tensor("token_embd.weight");
  const GgufTensor* e1 = again.tensor("token_embd.weight");
  ASSERT_TRUE(e0 && e1);
  ASSERT_EQ(e1->dtype, DType::Q8_0);
  EXPECT_EQ(std::memcmp(e0->data, e1->data, e0->nbytes), 0);
}

TEST(CliQuantize, BadInputIsOneErrorLine) {
  const std::string dir = wide_model_dir();
  const fs::path s = scratch("bad");
  const std::string out = (s / "m.gguf").string();
  const std::string base = "quantize --model " + dir + " ";
  CliResult r = run(base + "--type q3_k --out " + out);
  expect_user_error(r, "--type 'q3_k': use q8_0, q6_k, q5_k_m or q4_k_m");
  r = run(base + "--out " + out);
  expect_user_error(r, "--type");
  r = run(base + "--type q4_k_m --keep 'ffn_(down=q8_0' --out " + out);
  expect_user_error(r, "not a valid regular expression");
  r = run(base + "--type q4_k_m --keep 'ffn_down=q2_k' --out " + out);
  expect_user_error(r, "type 'q2_k' is not one of f32, f16, bf16");
  r = run(base + "--type q4_k_m --keep ffn_down --out " + out);
  expect_user_error(r, "want PATTERN=TYPE");
  r = run(base + "--type q4_k_m --out " + (s / "missing" / "m.gguf").string());
  expect_user_error(r, "does not exist");
  EXPECT_FALSE(fs::exists(s / "missing"));
  r = run("quantize --model " + s.string() + " --type q4_k_m --out " + out);
  expect_user_error(r, "not a model directory");
  EXPECT_FALSE(fs::exists(out));

  std::ofstream(s / "tok.json") << "{\"model\": ";
  r = run(base + "--type q4_k_m --tokenizer " + (s / "tok.json").string() + " --out " + out);
  expect_user_error(r, (s / "tok.json").string());
  EXPECT_FALSE(fs::exists(out));

  std::ofstream(out) << "precious";
  r = run(base + "--type q4_k_m --out " + out);
  expect_user_error(r, "exists; pass --force");
  EXPECT_EQ(slurp(out), "precious");
  r = run(base + "--type q8_0 --force --quiet --out " + out);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");  // --quiet: no progress
  EXPECT_EQ(GgufFile::open(out).get_int("general.file_type"), 7);
  r = run("quantize --model " + out + " --type q8_0 --force --out " + out);
  expect_user_error(r, "is the --model file");
}

// The community converters' files (both schemes; tests/gguf_community.h writes them from the
// published naming): an F32 file of either scheme quantizes to the directory's tensors, bit for
// bit, under zaya's (scheme B) names; its tokenizer.ggml.* keys are carried over.
TEST(CliQuantize, CommunityGgufSources) {
  const std::string dir = wide_model_dir();
  const GgufFile direct = GgufFile::open(quantize(dir, "direct_c", "--type q4_k_m"));
  const Model m = wide_model();
  for (const CommunityScheme s : {CommunityScheme::A, CommunityScheme::B}) {
    const bool a = s == CommunityScheme::A;
    SCOPED_TRACE(a ? "scheme A" : "scheme B");
    const std::string src = (scratch("community") / "in.gguf").string();
    write_community_gguf(src, m, s, {.outtype = DType::F32, .tokens = {"<pad>", "<eos>", "<bos>"}});
    CliResult r;
    const GgufFile f = GgufFile::open(quantize(src, a ? "from_a" : "from_b", "--type q4_k_m", &r));
    EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
    ASSERT_EQ(f.tensors().size(), direct.tensors().size());
    for (const GgufTensor& t : direct.tensors()) {
      const GgufTensor* u = f.tensor(t.name);
      ASSERT_NE(u, nullptr) << t.name;
      EXPECT_EQ(u->dtype, t.dtype) << t.name;
      ASSERT_EQ(u->nbytes, t.nbytes) << t.name;
      EXPECT_EQ(std::memcmp(u->data, t.data, t.nbytes), 0) << t.name;
    }
    const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->items.size(), 3u);
  }
}

// A quantized file runs: its loss on fixed token rows (`zaya eval --tokens`, the inference decoder
// on the stored blocks) is near the directory's — within 1 % (q8_0) and 5 % (q4_k_m) of the loss:
// this random model's large weights (std 0.2) are harsher on quantization than a trained model's,
// whose perplexity bounds the dated results of docs/quantization.md check — and `zaya generate`
// decodes from it.
TEST(CliQuantize, QuantizedFilesEvaluateNearTheDirectory) {
  const std::string dir = wide_model_dir();
  const fs::path rows = scratch("rows") / "tokens.txt";
  {
    std::ofstream f(rows);
    uint64_t s = 12345;
    for (int line = 0; line < 4; ++line) {
      for (int t = 0; t < 33; ++t) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        f << (t ? " " : "") << (s >> 33) % 1024;
      }
      f << "\n";
    }
  }
  auto loss_of = [&](const std::string& model) {
    const CliResult r = run("eval --model " + model + " --tokens " + rows.string() + " --json");
    EXPECT_EQ(r.code, 0) << r.err;
    return json::parse(r.out).at("loss").get<double>();
  };
  const double base = loss_of(dir);
  for (const auto& [type, bound] :
       {std::pair<const char*, double>{"q8_0", 0.01}, {"q4_k_m", 0.05}}) {
    SCOPED_TRACE(type);
    const std::string out =
        quantize(dir, std::string("eval_") + type, std::string("--type ") + type);
    const double q = loss_of(out);
    EXPECT_NE(q, base) << "the quantized file must not be the directory's weights";
    EXPECT_LE(std::abs(q - base) / base, bound) << "directory " << base << ", " << type << " " << q;
    std::printf("[ loss ] directory %.6f, %s %.6f (%+.3f%%)\n", base, type, q,
                100.0 * (q - base) / base);
    const CliResult g =
        run("generate --model " + out + " --prompt-ids \"1 2 3\" --max-new-tokens 4 --ids --quiet");
    EXPECT_EQ(g.code, 0) << g.err;
    EXPECT_FALSE(g.out.empty());
  }
}
