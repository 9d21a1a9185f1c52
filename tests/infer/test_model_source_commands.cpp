// infer/model_source through the commands: every command that takes --model runs a GGUF file as
// it runs the model directory it was written from (tests/gguf_model_file.h; the ZAYA1-8B-like
// tiny model of tests/chat_model_dir.h with the real Gemma 3 tokenizer). `zaya generate` greedy
// output is the directory's exactly (F32; BF16 as the directory's --bf16; a file with only the
// GGML tokenizer keys), `zaya template` renders the same prompt and ids, `zaya chat -p` gives the
// same answer, `zaya eval` the same loss (to 1e-5: the inference decoder against the training
// forward), `zaya serve` answers a request under the file's name, `zaya inspect` shows the file's
// types and bits per weight; a truncated file, another architecture's file, a file without a
// tokenizer and `zaya convert` of a GGUF file are one-line errors naming the file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include "chat_model_dir.h"
#include "cli_util.h"
#include "gguf_model_file.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// One GGUF file of the chat model directory per options, written once per test process.
const std::string& gguf_of(const GgufFileOptions& o, const std::string& name) {
  static ScratchDir dir;
  static std::map<std::string, std::string> files;
  auto [it, fresh] = files.emplace(name, dir / (name + ".gguf"));
  if (fresh) write_model_gguf(zaya_chat_model_dir(), it->second, o);
  return it->second;
}

const std::string& f32_gguf() {
  return gguf_of({}, "tiny-f32");
}

std::string q(const std::string& s) {
  return shell_quote(s);
}

CliResult run(const ScratchDir& d, const std::string& args) {
  return run_zaya_in(d.path, args);
}

#define NEED_CHAT_MODEL() \
  if (zaya_chat_model_dir().empty()) GTEST_SKIP() << gemma3_missing_message()

const char* kGreedy = " --prompt 'The quick brown fox' --max-new-tokens 12 --temperature 0 --quiet";

}  // namespace

TEST(ModelSourceCommands, GenerateFromGgufEqualsTheDirectory) {
  NEED_CHAT_MODEL();
  ScratchDir d;
  const std::string dir = q(zaya_chat_model_dir());
  for (const char* mode : {" --ids", ""}) {
    const CliResult want = run(d, "generate --model " + dir + kGreedy + mode);
    ASSERT_EQ(want.code, 0) << want.err;
    const CliResult got = run(d, "generate --model " + q(f32_gguf()) + kGreedy + mode);
    ASSERT_EQ(got.code, 0) << got.err;
    EXPECT_EQ(got.out, want.out);
    EXPECT_FALSE(want.out.empty());
  }
  // BF16 stored = the directory rounded to BF16 at load.
  const CliResult want = run(d, "generate --model " + dir + kGreedy + " --ids --bf16");
  const CliResult got =
      run(d, "generate --model " + q(gguf_of({.matrix = DType::BF16}, "tiny-bf16")) + kGreedy +
                 " --ids");
  ASSERT_EQ(got.code, 0) << got.err;
  EXPECT_EQ(got.out, want.out);
  // Only the GGML keys: the rebuilt tokenizer and the special ids give the same text.
  const CliResult text = run(d, "generate --model " + dir + kGreedy);
  const CliResult ggml =
      run(d, "generate --model " +
                 q(gguf_of({.tokenizer = GgufTokenizerKind::GgmlArrays, .embedded_extras = false},
                           "tiny-ggml")) +
                 kGreedy);
  ASSERT_EQ(ggml.code, 0) << ggml.err;
  EXPECT_EQ(ggml.out, text.out);
  // The log line names the file.
  const CliResult logged = run(
      d, "generate --model " + q(f32_gguf()) + " --prompt-ids '2 651' --ids --max-new-tokens 2");
  EXPECT_NE(logged.err.find("generate: " + f32_gguf() + " ("), std::string::npos) << logged.err;
}

TEST(ModelSourceCommands, TemplateAndChatFromGgufEqualTheDirectory) {
  NEED_CHAT_MODEL();
  ScratchDir d;
  std::ofstream(d / "m.json") << R"([{"role": "system", "content": "Be brief."},
                                     {"role": "user", "content": "Name a colour."}])";
  const std::string dir = q(zaya_chat_model_dir());
  for (const char* ids : {"", " --ids"}) {
    const std::string args = " --messages " + q(d / "m.json") + ids;
    const CliResult want = run(d, "template --model " + dir + args);
    const CliResult got = run(d, "template --model " + q(f32_gguf()) + args);
    ASSERT_EQ(got.code, 0) << got.err;
    EXPECT_EQ(got.out, want.out);
    EXPECT_NE(got.err.find(f32_gguf() + " (tokenizer.chat_template) (model template)"),
              std::string::npos)
        << got.err;
  }
  const std::string chat = " -p 'Name a colour.' --temperature 0 --max-tokens 10 --quiet";
  const CliResult want = run(d, "chat --model " + dir + chat);
  ASSERT_EQ(want.code, 0) << want.err;
  const CliResult got = run(d, "chat --model " + q(f32_gguf()) + chat);
  ASSERT_EQ(got.code, 0) << got.err;
  EXPECT_EQ(got.out, want.out);
  EXPECT_FALSE(got.out.empty());
}

TEST(ModelSourceCommands, EvalOfGgufEqualsTheDirectory) {
  NEED_CHAT_MODEL();
  ScratchDir d;
  std::ofstream(d / "t.txt") << "In the beginning God created the heaven and the earth. And the "
                                "earth was without form, and void; and darkness was upon the face "
                                "of the deep.\n";
  const std::string args = " --text " + q(d / "t.txt") + " --context 16 --stride 8 --json --quiet";
  const CliResult want = run(d, "eval --model " + q(zaya_chat_model_dir()) + args);
  ASSERT_EQ(want.code, 0) << want.err;
  const CliResult got = run(d, "eval --model " + q(f32_gguf()) + args);
  ASSERT_EQ(got.code, 0) << got.err;
  const json a = json::parse(want.out), b = json::parse(got.out);
  EXPECT_GT(a["windows"].get<int64_t>(), 1);
  EXPECT_EQ(b["tokens"], a["tokens"]);
  EXPECT_EQ(b["windows"], a["windows"]);
  EXPECT_NEAR(b["loss"].get<double>(), a["loss"].get<double>(), kModelLossAbs);
  // Token rows too; the training model's outputs are refused for a GGUF file.
  std::ofstream(d / "ids.txt") << "2 651 1234 9 10 11\n2 7 8 9 10 12\n";
  const std::string rows = " --tokens " + q(d / "ids.txt") + " --json --quiet";
  const json ra = json::parse(run(d, "eval --model " + q(zaya_chat_model_dir()) + rows).out);
  const json rb = json::parse(run(d, "eval --model " + q(f32_gguf()) + rows).out);
  EXPECT_NEAR(rb["loss"].get<double>(), ra["loss"].get<double>(), kModelLossAbs);
  expect_user_error(run(d, "eval --model " + q(f32_gguf()) + rows + " --logits " + q(d / "l")),
                    f32_gguf());
}

TEST(ModelSourceCommands, InspectShowsTheFilesTypes) {
  NEED_CHAT_MODEL();
  ScratchDir d;
  const CliResult dir = run(d, "inspect " + q(zaya_chat_model_dir()) + " --json");
  const CliResult f32 = run(d, "inspect " + q(f32_gguf()) + " --json");
  ASSERT_EQ(f32.code, 0) << f32.err;
  const json a = json::parse(dir.out), b = json::parse(f32.out);
  EXPECT_EQ(b["params_total"], a["params_total"]);
  EXPECT_EQ(b["schema"], a["schema"]);
  EXPECT_EQ(b["gguf"]["scheme"], "B");
  EXPECT_TRUE(b["gguf"]["zaya_written"].get<bool>());
  EXPECT_EQ(b["gguf"]["bits_per_weight"].get<double>(), 32.0);
  ASSERT_EQ(b["gguf"]["types"].size(), 1u);
  EXPECT_EQ(b["gguf"]["types"][0]["type"], "F32");
  // BF16 matrices and conv weights, F32 vectors: BF16 holds most bytes, 16 < bits < 32.
  const std::string bf16 = gguf_of({.matrix = DType::BF16}, "tiny-bf16");
  const json c = json::parse(run(d, "inspect " + q(bf16) + " --json").out);
  EXPECT_EQ(c["gguf"]["types"][0]["type"], "BF16");
  EXPECT_EQ(c["gguf"]["types"][1]["type"], "F32");
  const double bits = c["gguf"]["bits_per_weight"].get<double>();
  EXPECT_GT(bits, 16.0);
  EXPECT_LT(bits, 17.0);
  const CliResult table = run(d, "inspect " + q(bf16));
  EXPECT_NE(table.out.find("GGUF                   v3, scheme B (zaya-written)"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("  BF16 "), std::string::npos) << table.out;
}

TEST(ModelSourceCommands, ServeAnswersFromGguf) {
  NEED_CHAT_MODEL();
  ScratchDir d;
  const std::string out = d / "serve.out", err = d / "serve.err";
  const pid_t pid = fork();
  if (pid == 0) {
    freopen(out.c_str(), "w", stdout);
    freopen(err.c_str(), "w", stderr);
    const std::string model = f32_gguf();
    execl(ZAYA_BINARY, ZAYA_BINARY, "serve", "--model", model.c_str(), "--port", "0", "--threads",
          "1", static_cast<char*>(nullptr));
    _exit(127);
  }
  std::string base;
  const std::regex line(R"(on (http://127\.0\.0\.1:\d+) — )");
  for (int i = 0; i < 1200 && base.empty(); ++i) {  // 60 s: the tokenizer and the file load
    std::smatch m;
    const std::string s = slurp(out);
    if (std::regex_search(s, m, line)) base = m[1];
    if (waitpid(pid, nullptr, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(base.empty()) << slurp(err);
  EXPECT_NE(slurp(out).find("zaya serve: tiny-f32 ("), std::string::npos) << slurp(out);
  std::ofstream(d / "req") << R"({"model": "tiny-f32", "prompt": "The quick brown fox",
                                 "max_tokens": 6, "temperature": 0})";
  const std::string cmd = "curl -s -X POST -H 'Content-Type: application/json' --data-binary @" +
                          q(d / "req") + " -o " + q(d / "resp") + " " + q(base + "/v1/completions");
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  const json r = json::parse(slurp(d / "resp"), nullptr, false);
  ASSERT_TRUE(r.is_object()) << slurp(d / "resp");
  EXPECT_EQ(r["model"], "tiny-f32");
  EXPECT_EQ(r["usage"]["completion_tokens"], 6);
  // The same text as generate from the directory (greedy, the same BOS rule).
  const CliResult want = run(d, "generate --model " + q(zaya_chat_model_dir()) +
                                    " --prompt 'The quick brown fox' --max-new-tokens 6 "
                                    "--temperature 0 --ignore-eos --quiet");
  EXPECT_EQ(r["choices"][0]["text"].get<std::string>() + "\n", want.out);
}

TEST(ModelSourceCommands, BadFilesAreOneLineErrorsNamingTheFile) {
  NEED_CHAT_MODEL();
  ScratchDir d;
  const std::string cut = d / "cut.gguf";
  {
    std::ifstream in(f32_gguf(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() * 3 / 4);
  }
  for (const char* cmd : {"generate --prompt x --model ", "eval --text /dev/null --model ",
                          "inspect ", "bench decode --model "})
    expect_user_error(run(d, std::string(cmd) + q(cut)), cut);
  const std::string llama = d / "llama.gguf";
  {
    GgufWriter w(llama);
    w.set("general.architecture", GgufValue::str("llama"));
    w.finish();
  }
  expect_user_error(run(d, "generate --prompt x --model " + q(llama)), llama + ": ");
  expect_user_error(run(d, "chat -p x --model " + q(llama)), "'llama', not 'zaya'");
  const std::string none = gguf_of({.tokenizer = GgufTokenizerKind::None}, "tiny-none");
  expect_user_error(run(d, "generate --prompt x --model " + q(none)),
                    none + ": this GGUF has no tokenizer zaya can read");
  // No tokenizer is needed for ids in and out; --tokenizer supplies one.
  EXPECT_EQ(
      run(d, "generate --prompt-ids '2 651' --ids --max-new-tokens 2 --model " + q(none)).code, 0);
  EXPECT_EQ(run(d, "generate --prompt x --max-new-tokens 2 --model " + q(none) + " --tokenizer " +
                       q(zaya_chat_model_dir() + "/tokenizer.json"))
                .code,
            0);
  expect_user_error(run(d, "convert --to original " + q(f32_gguf()) + " " + q(d / "out")),
                    "a GGUF file; zaya convert converts model directories");
}
