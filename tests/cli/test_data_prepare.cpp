// `zaya data prepare` end to end with the toy tokenizer: a JSON Lines corpus becomes shards the
// loader reads; bad input gives one "zaya: error:" line and exit 1; --quiet prints no progress.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_util.h"
#include "data/loader.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;
using zaya::test::ScratchDir;
namespace fs = std::filesystem;

namespace {

CliResult run_zaya(const ScratchDir& dir, const std::string& args) {
  return run_zaya_in(dir.path, args);
}

const std::string kTokenizer = std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/toy_tokenizer.json";

}  // namespace

TEST(DataPrepareCli, JsonlToShardsThatLoad) {
  ASSERT_TRUE(fs::exists(kTokenizer)) << "missing fixture " << kTokenizer;
  ScratchDir dir;
  std::ofstream corpus(dir / "c.jsonl");
  for (int i = 0; i < 200; ++i)
    corpus << nlohmann::json{{"text", "The quick brown fox " + std::to_string(i) +
                                          " jumps over the lazy dog.\nSecond line."}}
                  .dump()
           << "\n";
  corpus.close();
  const CliResult r = run_zaya(dir, "data prepare --tokenizer " + kTokenizer + " --input " +
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
  const CliResult loud = run_zaya(dir, "data prepare --tokenizer " + kTokenizer + " --input " +
                                           (dir / "c.jsonl") + " --out " + (dir / "ds2"));
  ASSERT_EQ(loud.code, 0) << loud.err;
  EXPECT_NE(loud.err.find("data prepare: "), std::string::npos) << loud.err;
  EXPECT_NE(loud.err.find("/s"), std::string::npos) << loud.err;
  EXPECT_EQ(loud.err.find('\r'), std::string::npos) << loud.err;
}

TEST(DataPrepareCli, BadInputIsOneErrorLine) {
  ASSERT_TRUE(fs::exists(kTokenizer)) << "missing fixture " << kTokenizer;
  ScratchDir dir;
  CliResult r = run_zaya(dir, "data prepare --tokenizer " + kTokenizer + " --input " +
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
