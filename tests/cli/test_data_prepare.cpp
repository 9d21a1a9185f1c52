// `zaya data prepare` end to end with the toy tokenizer: a JSON Lines corpus becomes shards the
// loader reads; one text file gets a validation split; the summary on stdout, progress and the
// small-split warning on stderr; bad input gives one "zaya: error:" line and exit 1; --quiet
// prints no progress.
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

// One text file (one document) of about 1 MB: --val-fraction 0.05 sets its last 5% aside, a
// split the trainer can read many windows from, and no warning.
TEST(DataPrepareCli, OneTextFileGetsAUsableValSplit) {
  ASSERT_TRUE(fs::exists(kTokenizer)) << "missing fixture " << kTokenizer;
  ScratchDir dir;
  std::ifstream in(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/gemma3_corpus.jsonl");
  std::string text;
  for (std::string line; std::getline(in, line);)
    text += nlohmann::json::parse(line).get<std::string>() + "\n";
  ASSERT_GT(text.size(), size_t(900) << 10);
  std::ofstream(dir / "book.txt", std::ios::binary) << text;
  const CliResult r =
      run_zaya(dir, "data prepare --tokenizer " + kTokenizer + " --input " + (dir / "book.txt") +
                        " --out " + (dir / "ds") + " --val-fraction 0.05");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("1 files, 1 documents"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("val:   1 documents"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("last 5% of the tokens of every document"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("/s"), std::string::npos) << "progress on stdout: " << r.out;
  EXPECT_NE(r.err.find("data prepare: "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  TokenLoader train(dir / "ds", "train", 129, 1);
  TokenLoader val(dir / "ds", "val", 129, 1);
  const double share =
      double(val.total_tokens()) / double(train.total_tokens() + val.total_tokens());
  EXPECT_NEAR(share, 0.05, 0.001);
  EXPECT_GT(val.total_windows(), 50);
  EXPECT_EQ(val.manifest().cut_documents, 1);
}

// A small corpus: the validation split is a few hundred tokens, and stderr says so with the
// seq_len it assumes; --quiet keeps the summary but drops the warning with the progress.
TEST(DataPrepareCli, SmallValSplitWarnsOnStderr) {
  ASSERT_TRUE(fs::exists(kTokenizer)) << "missing fixture " << kTokenizer;
  ScratchDir dir;
  std::string text;
  for (int i = 0; i < 100; ++i) text += "line " + std::to_string(i) + " of a short story.\n";
  std::ofstream(dir / "short.txt", std::ios::binary) << text;
  const std::string args = "data prepare --tokenizer " + kTokenizer + " --input " +
                           (dir / "short.txt") + " --out " + (dir / "ds") + " --val-fraction 0.05";
  const CliResult r = run_zaya(dir, args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("val:   1 documents"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("data prepare: warning: the validation split holds only"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("seq_len 1024"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--val-fraction (now 0.05)"), std::string::npos) << r.err;
  const CliResult quiet = run_zaya(dir, args + " --quiet");
  ASSERT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  EXPECT_EQ(quiet.out, r.out);  // the result, unchanged
}
