// The zaya binary end to end: `eval` against the twin's vectors, `inspect` on ZAYA1-base, and
// every kind of bad input giving one clear "zaya: error:" line and exit code 1 (never a crash).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "io/safetensors.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;
namespace fs = std::filesystem;

namespace {

// A fresh directory private to this test process (ctest runs tests in parallel), inside one
// ScratchDir that is removed when the process exits.
fs::path scratch(const std::string& name) {
  static const zaya::test::ScratchDir root;
  const fs::path p = fs::path(root.path) / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

CliResult run_zaya(const std::string& args) {
  return run_zaya_in(scratch("run").string(), args);
}

// The first committed twin case: a valid tiny model and its token lines.
fs::path good_case() {
  const fs::path root = fs::path(ZAYA_TEST_FIXTURES) / "model";
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs.at(0);
}

// Copies the good model into a scratch dir, letting `edit` change its tensors before writing.
struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<char> bytes;
};
fs::path edited_model(const std::string& name,
                      const std::function<void(std::vector<Entry>&)>& edit) {
  const fs::path src = good_case(), dst = scratch(name);
  fs::copy_file(src / "config.json", dst / "config.json");
  const SafeTensors st = SafeTensors::open_dir(src.string());
  std::vector<Entry> entries;
  for (const std::string& n : st.names()) {
    const SafeTensorInfo& info = st.at(n);
    const char* p = static_cast<const char*>(info.data);
    entries.push_back({n, info.dtype, info.shape, std::vector<char>(p, p + info.nbytes)});
  }
  edit(entries);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (Entry& e : entries) {
    Tensor t(e.bytes.data(), e.dtype, {int64_t(e.bytes.size() / dtype_size(e.dtype))});
    t.ndim = int(e.shape.size());
    for (int i = 0; i < t.ndim; ++i) t.shape[i] = e.shape[size_t(i)];
    tensors.emplace_back(e.name, t);
  }
  save_safetensors((dst / "model.safetensors").string(), tensors);
  return dst;
}

std::string eval_args(const fs::path& model, const fs::path& tokens) {
  return "eval --model " + model.string() + " --tokens " + tokens.string();
}
fs::path good_tokens() {
  return good_case() / "tokens.txt";
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

}  // namespace

TEST(CliEval, LossLogitsAndGradsMatchTheTwin) {
  const fs::path out = scratch("eval_out");
  const CliResult r = run_zaya(eval_args(good_case(), good_tokens()) + " --logits " +
                               (out / "logits.safetensors").string() + " --grads " +
                               (out / "grads.safetensors").string() + " --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << "--quiet printed: " << r.err;
  ASSERT_EQ(r.out.rfind("loss ", 0), 0u) << r.out;
  const double loss = std::stod(r.out.substr(5));
  const SafeTensors want = SafeTensors::open_file((good_case() / "expected.safetensors").string());
  std::vector<double> want_loss(1);
  want.read_into("loss", Tensor(want_loss.data(), {1}));
  EXPECT_NEAR(loss, want_loss[0], kModelLossAbs);

  const SafeTensors logits = SafeTensors::open_file((out / "logits.safetensors").string());
  EXPECT_EQ(logits.at("logits").shape, want.at("logits").shape);
  const SafeTensors grads = SafeTensors::open_file((out / "grads.safetensors").string());
  for (const std::string& name : want.names()) {
    if (name == "logits" || name == "loss") continue;
    const SafeTensorInfo* g = grads.find(name);
    ASSERT_NE(g, nullptr) << name;
    EXPECT_EQ(g->dtype, DType::F32);
    std::vector<double> a(size_t(g->numel())), b(size_t(g->numel()));
    Tensor ta(a.data(), {g->numel()}), tb(b.data(), {g->numel()});
    ta.ndim = tb.ndim = int(g->shape.size());
    for (int i = 0; i < ta.ndim; ++i) ta.shape[i] = tb.shape[i] = g->shape[size_t(i)];
    grads.read_into(name, ta);
    want.read_into(name, tb);
    double norm = 0;
    for (double x : b) norm += x * x;
    if (norm > 0) {
      EXPECT_LE(rel_l2(a.data(), b.data(), a.size()), kModelGradRelL2) << name;
    }
  }
  for (const std::string& name : grads.names())
    EXPECT_EQ(name.find("balancing_biases"), std::string::npos) << "a buffer has no gradient";
}

TEST(CliInspect, Zaya1BaseCountsAndKvCompression) {
  const CliResult r =
      run_zaya("inspect " + (fs::path(ZAYA_TEST_FIXTURES) / "configs" / "zaya1-base.json").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("8,840,488,784 (8.840B)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("8,303,355,728 (8.303B)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("753,608,528 (0.754B)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("680 values"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2483 tensors"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("8.0x smaller"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("40.0 KiB"), std::string::npos) << r.out;  // 40 layers × 2 × 2 × 128 × 2 B
}

TEST(CliInspect, TinyConfigCounts) {
  const CliResult r =
      run_zaya("inspect --json " + (fs::path(ZAYA_TEST_FIXTURES) / "configs" / "tiny.json").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"params_total\": 155556"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"params_without_embedding\": 122788"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"params_active_without_embedding\": 49060"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"tensors\": 79"), std::string::npos) << r.out;
}

TEST(CliErrors, MissingFilesAndDirectories) {
  expect_user_error(run_zaya(eval_args("/nonexistent/model", good_tokens())), "/nonexistent/model");
  const fs::path empty = scratch("empty_model");
  expect_user_error(run_zaya(eval_args(empty, good_tokens())), "config.json");
  const fs::path no_weights = scratch("no_weights");
  fs::copy_file(good_case() / "config.json", no_weights / "config.json");
  expect_user_error(run_zaya(eval_args(no_weights, good_tokens())), "model.safetensors");
  expect_user_error(run_zaya(eval_args(good_case(), "/nonexistent/tokens.txt")), "tokens.txt");
  expect_user_error(run_zaya("inspect /nonexistent/config.json"), "config.json");
}

TEST(CliErrors, BadFlagsExitNonZero) {
  CliResult r = run_zaya("eval --model " + good_case().string());  // --tokens missing
  EXPECT_FALSE(r.crashed);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--tokens"), std::string::npos) << r.err;
  r = run_zaya("eval --no-such-flag");
  EXPECT_FALSE(r.crashed);
  EXPECT_NE(r.code, 0);
  r = run_zaya("frobnicate");
  EXPECT_FALSE(r.crashed);
  EXPECT_NE(r.code, 0);
}

TEST(CliErrors, MalformedConfig) {
  const nlohmann::json good = nlohmann::json::parse(slurp(good_case() / "config.json"));
  auto with = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    const fs::path dir = scratch(name);
    fs::copy_file(good_case() / "model.safetensors", dir / "model.safetensors");
    nlohmann::json j = good;
    edit(j);
    write(dir / "config.json", j.dump());
    return dir;
  };
  expect_user_error(run_zaya(eval_args(with("no_hidden", [](auto& j) { j.erase("hidden_size"); }),
                                       good_tokens())),
                    "hidden_size");
  expect_user_error(
      run_zaya(eval_args(with("topk", [](auto& j) { j["moe_router_topk"] = 2; }), good_tokens())),
      "moe_router_topk");
  expect_user_error(run_zaya(eval_args(with("layers", [](auto& j) { j["zaya_layers"][0] = "b"; }),
                                       good_tokens())),
                    "zaya_layers");
  const fs::path bad_json = scratch("bad_json");
  fs::copy_file(good_case() / "model.safetensors", bad_json / "model.safetensors");
  write(bad_json / "config.json", "{\"hidden_size\": 64,");
  expect_user_error(run_zaya(eval_args(bad_json, good_tokens())), "config.json");
  // A valid config of another width: every tensor's shape disagrees with it.
  const fs::path wide = with("wide", [](auto& j) { j["vocab_size"] = int(j["vocab_size"]) + 1; });
  expect_user_error(run_zaya(eval_args(wide, good_tokens())), "model.embed_tokens.weight");
}

TEST(CliErrors, MalformedSafetensors) {
  const std::string bytes = slurp(good_case() / "model.safetensors");
  auto with_bytes = [&](const std::string& name, const std::string& content) {
    const fs::path dir = scratch(name);
    fs::copy_file(good_case() / "config.json", dir / "config.json");
    write(dir / "model.safetensors", content);
    return dir;
  };
  expect_user_error(
      run_zaya(eval_args(with_bytes("trunc", bytes.substr(0, bytes.size() / 2)), good_tokens())),
      "model.safetensors");
  expect_user_error(run_zaya(eval_args(with_bytes("tiny", bytes.substr(0, 5)), good_tokens())),
                    "model.safetensors");
  expect_user_error(
      run_zaya(eval_args(with_bytes("garbage", std::string(4096, '\x7f')), good_tokens())),
      "model.safetensors");
  // A header whose offsets point past the data.
  const std::string header =
      R"({"model.embed_tokens.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,1600]}})";
  std::string crafted(8, '\0');
  uint64_t len = header.size();
  std::memcpy(crafted.data(), &len, 8);
  crafted += header + std::string(16, '\0');
  expect_user_error(run_zaya(eval_args(with_bytes("offsets", crafted), good_tokens())),
                    "model.safetensors");
}

TEST(CliErrors, WrongTensors) {
  const std::string victim = "model.final_norm.weight";
  auto find = [&](std::vector<Entry>& es) -> Entry& {
    for (Entry& e : es)
      if (e.name == victim) return e;
    throw std::runtime_error("no " + victim);
  };
  expect_user_error(
      run_zaya(eval_args(edited_model("missing",
                                      [&](auto& es) {
                                        es.erase(std::find_if(es.begin(), es.end(), [&](auto& e) {
                                          return e.name == victim;
                                        }));
                                      }),
                         good_tokens())),
      victim);
  expect_user_error(run_zaya(eval_args(edited_model("shape",
                                                    [&](auto& es) {
                                                      Entry& e = find(es);
                                                      e.shape = {e.shape[0] / 2, 2};
                                                    }),
                                       good_tokens())),
                    victim);
  expect_user_error(
      run_zaya(eval_args(edited_model("dtype", [&](auto& es) { find(es).dtype = DType::I32; }),
                         good_tokens())),
      victim);
}

TEST(CliErrors, BadTokenLines) {
  const fs::path dir = scratch("tokens");
  write(dir / "range.txt", "1 2 3\n4 5 99999\n");
  expect_user_error(run_zaya(eval_args(good_case(), dir / "range.txt")), "99999");
  write(dir / "ragged.txt", "1 2 3\n4 5\n");
  expect_user_error(run_zaya(eval_args(good_case(), dir / "ragged.txt")), "line 2");
  write(dir / "word.txt", "1 2 three\n");
  expect_user_error(run_zaya(eval_args(good_case(), dir / "word.txt")), "three");
  write(dir / "short.txt", "1\n2\n");
  expect_user_error(run_zaya(eval_args(good_case(), dir / "short.txt")), "at least 2");
  write(dir / "empty.txt", "");
  expect_user_error(run_zaya(eval_args(good_case(), dir / "empty.txt")), "empty");
}
