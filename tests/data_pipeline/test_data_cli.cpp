// `zaya data prepare` end to end with the toy tokenizer: a JSON Lines corpus becomes shards the
// loader reads; bad input gives one "zaya: error:" line and exit 1; --quiet prints no progress.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/loader.h"
#include "test_util.h"

using namespace zaya;
using zaya::test::ScratchDir;
namespace fs = std::filesystem;

namespace {

struct Result {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

Result run_zaya(const ScratchDir& dir, const std::string& args) {
  const std::string cmd =
      std::string(ZAYA_BINARY) + " " + args + " >" + (dir / "stdout") + " 2>" + (dir / "stderr");
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir / "stdout"),
          slurp(dir / "stderr")};
}

const std::string kTokenizer = std::string(ZAYA_TEST_DATA) + "/tokenizer/toy_tokenizer.json";

}  // namespace

TEST(DataPrepareCli, JsonlToShardsThatLoad) {
  if (!fs::exists(kTokenizer)) GTEST_SKIP() << "no " << kTokenizer;
  ScratchDir dir;
  std::ofstream corpus(dir / "c.jsonl");
  for (int i = 0; i < 200; ++i)
    corpus << nlohmann::json{{"text", "The quick brown fox " + std::to_string(i) +
                                          " jumps over the lazy dog.\nSecond line."}}
                  .dump()
           << "\n";
  corpus.close();
  const Result r = run_zaya(dir, "data prepare --tokenizer " + kTokenizer + " --input " +
                                     (dir / "*.jsonl") + " --out " + (dir / "ds") +
                                     " --val-fraction 0.1 --shard-tokens 1000 --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");  // --quiet: no progress
  EXPECT_NE(r.out.find("200 documents"), std::string::npos) << r.out;
  TokenLoader train(dir / "ds", "train", 17, 1);
  TokenLoader val(dir / "ds", "val", 17, 1);
  EXPECT_GT(train.total_windows(), val.total_windows());
  EXPECT_GT(val.total_windows(), 0);
  EXPECT_NE(train.manifest().tokenizer_xxh3, "");
  std::vector<int32_t> w(17);
  train.read_window(0, w.data());
  EXPECT_EQ(w[0], train.manifest().bos_id);  // the first document starts with BOS

  // Without --quiet, progress goes to stderr as plain lines (not a terminal here).
  const Result loud = run_zaya(dir, "data prepare --tokenizer " + kTokenizer + " --input " +
                                        (dir / "c.jsonl") + " --out " + (dir / "ds2"));
  ASSERT_EQ(loud.code, 0) << loud.err;
  EXPECT_NE(loud.err.find("data prepare: "), std::string::npos) << loud.err;
  EXPECT_NE(loud.err.find("/s"), std::string::npos) << loud.err;
  EXPECT_EQ(loud.err.find('\r'), std::string::npos) << loud.err;
}

TEST(DataPrepareCli, BadInputIsOneErrorLine) {
  if (!fs::exists(kTokenizer)) GTEST_SKIP() << "no " << kTokenizer;
  ScratchDir dir;
  Result r = run_zaya(dir, "data prepare --tokenizer " + kTokenizer + " --input " +
                               (dir / "none*.txt") + " --out " + (dir / "ds") + " --quiet");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.rfind("zaya: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("no file matches"), std::string::npos) << r.err;

  std::ofstream(dir / "bad.jsonl") << "{\"text\": \"fine\"}\n{\"txt\": 1}\n";
  r = run_zaya(dir, "data prepare --tokenizer " + kTokenizer + " --input " + (dir / "bad.jsonl") +
                        " --out " + (dir / "ds") + " --quiet");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("bad.jsonl:2"), std::string::npos) << r.err;

  r = run_zaya(dir, "data");  // "prepare" is required
  EXPECT_NE(r.code, 0);
}
