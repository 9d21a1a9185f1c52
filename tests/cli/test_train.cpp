// `zaya train` end to end, as a user meets it: checkpoints go to runs/<TOML stem>/ by default and
// the final line (stdout, kept by --quiet) names the model directory; SIGINT and SIGTERM stop
// after the step with a checkpoint and print the command that resumes it, bitwise (one process,
// and under mpirun with the signal sent to one rank only); a model with a larger vocabulary than
// its tokenizer trains, samples and keeps its weights; the checks before step 1 name both sides;
// a finished run says so; relative paths in the TOML are its folder's, and file errors name the
// key and the file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "cli_util.h"
#include "data/shards.h"
#include "integration/mpirun_job.h"
#include "io/file.h"
#include "test_skips.h"
#include "test_util.h"
#include "train/tiny_data.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using test::CliResult;
using test::ScratchDir;
using test::slurp;

// Starts `zaya ARGS` in `cwd` with stdout and stderr to files (and `env` added).
pid_t spawn_zaya(const std::string& cwd, const std::vector<std::string>& args,
                 const std::string& out, const std::string& err,
                 const std::vector<std::pair<std::string, std::string>>& env = {}) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(cwd.c_str()) != 0) _exit(126);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    const int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(126);
    std::vector<char*> argv{const_cast<char*>(ZAYA_BINARY)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(ZAYA_BINARY, argv.data());
    _exit(127);
  }
  return pid;
}

CliResult wait_zaya(pid_t pid, const std::string& out, const std::string& err) {
  int status = 0;
  waitpid(pid, &status, 0);
  CliResult r;
  r.crashed = WIFSIGNALED(status);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// `zaya ARGS` run in `cwd` (a folder the test owns: the capture files go there too).
CliResult run_at(const std::string& cwd, const std::vector<std::string>& args) {
  const std::string out = cwd + "/.stdout", err = cwd + "/.stderr";
  return wait_zaya(spawn_zaya(cwd, args, out, err), out, err);
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

std::vector<std::string> lines(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> l;
  for (std::string x; std::getline(in, x);) l.push_back(x);
  return l;
}

int64_t metric_lines(const std::string& path) {
  std::ifstream f(path);
  int64_t n = 0;
  for (std::string line; std::getline(f, line);) n += !line.empty();
  return n;
}

// A scratch tree: the tiny byte dataset (shards/), a tokenized one, a work/ folder to run in and
// configs/ for the TOML files.
struct Tree {
  ScratchDir dir;
  std::string shards = test::make_tiny_dataset(dir);
  std::string work = dir / "work", configs = dir / "configs";
  Tree() {
    fs::create_directories(work);
    fs::create_directories(configs);
  }
  // configs/NAME.toml: the tiny model on `data` (absolute paths), 2 rows of 16 tokens per step;
  // `train` and `data_lines` add lines to those sections, `rest` whole sections.
  std::string toml(const std::string& name, int64_t steps, const std::string& rest = "",
                   const std::string& data = "", const std::string& train = "",
                   const std::string& data_lines = "") const {
    const std::string path = configs + "/" + name + ".toml";
    std::ofstream(path) << "[model]\nconfig = \"" << ZAYA_TEST_FIXTURES << "/configs/tiny.json\"\n"
                        << "[data]\ndataset = \"" << (data.empty() ? shards : data)
                        << "\"\nseq_len = 16\n"
                        << data_lines << "[train]\nmicro_batch = 2\nsteps = " << steps
                        << "\neval_every = 0\neval_batches = 1\nlog_every = 1\n"
                        << train << "[optim]\nwarmup = 2\n"
                        << rest;
    return path;
  }
};

// No checkpoint key at all: the checkpoints go to runs/<stem>/ under the current directory, every
// 10% of the steps, and the last line — on stdout, also with --quiet — names the model.
TEST(TrainCli, ByDefaultTheModelIsSavedUnderRunsAndTheLastLineNamesIt) {
  Tree t;
  const std::string cfg = t.toml("my-run", 20);
  const CliResult r = run_at(t.work, {"train", "--config", cfg});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(verify_checkpoint(t.work + "/runs/my-run/step_00000020"), "");
  EXPECT_EQ(verify_checkpoint(t.work + "/runs/my-run/step_00000018"), "");  // 10% of 20 steps
  EXPECT_FALSE(fs::exists(t.work + "/runs/my-run/step_00000017"));
  ASSERT_EQ(lines(r.out).size(), 1u) << r.out;
  EXPECT_EQ(r.out.rfind("train: 20 steps in ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("; model runs/my-run/step_00000020/model\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("step     20/20"), std::string::npos) << r.err;  // progress: stderr
  // --quiet: nothing on stderr, the same line on stdout.
  const std::string quiet_cfg = t.toml("quiet-run", 2);
  const CliResult q = run_at(t.work, {"train", "--config", quiet_cfg, "--quiet"});
  ASSERT_EQ(q.code, 0) << q.err;
  EXPECT_EQ(q.err, "");
  EXPECT_NE(q.out.find("; model runs/quiet-run/step_00000002/model\n"), std::string::npos) << q.out;
  // checkpoint.dir = "none": said so, nothing written.
  const CliResult off =
      run_at(t.work, {"train", "--config", quiet_cfg, "--quiet", "--set", "checkpoint.dir=none"});
  ASSERT_EQ(off.code, 0) << off.err;
  EXPECT_NE(off.out.find("; no checkpoint: checkpoint.dir = none (--set)\n"), std::string::npos)
      << off.out;
}

// SIGINT (exit 130) and SIGTERM (143) in the middle of a run: the step finishes, a checkpoint is
// written, the last line says where and how to resume; that command ends the run bitwise where
// an uninterrupted one ends.
TEST(TrainCli, AStopSignalSavesAndTheResumeCommandItPrintsIsBitwise) {
  Tree t;
  const int64_t steps = 60;
  const std::string straight = t.toml("straight", steps, "[checkpoint]\nasync = false\n");
  ASSERT_EQ(run_at(t.work, {"train", "--config", straight, "--quiet"}).code, 0);
  const std::string final_weights = "/step_00000060/model/model.safetensors";
  for (int sig : {SIGINT, SIGTERM}) {
    const std::string name = sig == SIGINT ? "int" : "term";
    const std::string cfg = t.toml(name, steps, "", "", "metrics = \"" + name + ".jsonl\"\n");
    const std::string metrics = t.configs + "/" + name + ".jsonl";
    const std::string out = t.dir / (name + ".out"), err = t.dir / (name + ".err");
    const pid_t pid = spawn_zaya(t.work, {"train", "--config", cfg}, out, err);
    for (int i = 0; i < 3000 && metric_lines(metrics) < 3; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(kill(pid, sig), 0);
    const CliResult r = wait_zaya(pid, out, err);
    ASSERT_EQ(r.code, 128 + sig) << r.out << r.err;
    const auto w = words(r.out);
    // train: stopped by SIGINT after step N/60; checkpoint DIR (model DIR/model); resume with: …
    ASSERT_GE(w.size(), 13u) << r.out;
    EXPECT_EQ(w[3], sig == SIGINT ? "SIGINT" : "SIGTERM") << r.out;
    const int64_t n = std::stoll(w[6].substr(0, w[6].find('/')));
    EXPECT_GE(n, 3);
    ASSERT_LT(n, steps) << "the run ended before the signal: " << r.out;
    const std::string ckpt = "runs/" + name + "/step_" + fmt::format("{:08d}", n);
    EXPECT_EQ(w[8], ckpt) << r.out;
    EXPECT_NE(r.out.find("checkpoint " + ckpt + " (model " + ckpt +
                         "/model); resume with: zaya "
                         "train --config " +
                         cfg + "\n"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(verify_checkpoint(t.work + "/" + ckpt), "");
    EXPECT_NE(r.err.find("finishing this step, then saving a checkpoint"), std::string::npos)
        << r.err;
    // The printed command, as printed.
    std::vector<std::string> resume = words(r.out.substr(r.out.find("resume with: zaya ") + 18));
    const CliResult rest = run_at(t.work, resume);
    ASSERT_EQ(rest.code, 0) << rest.err;
    EXPECT_NE(rest.err.find("resumed from " + ckpt + " at step " + std::to_string(n)),
              std::string::npos)
        << rest.err;
    EXPECT_TRUE(slurp(t.work + "/runs/straight" + final_weights) ==
                slurp(t.work + "/runs/" + name + final_weights))
        << name << ": the resumed run's final weights differ from the uninterrupted run's";
  }
}

// Several ranks (mpirun): the signal reaches one rank only; all stop after the same step with one
// checkpoint holding every rank's shard, and exit 143.
TEST(TrainCli, RanksAgreeOnTheStepTheyStopAfter) {
  SKIP_WITHOUT_MPIRUN();
  Tree t;
  const std::string cfg = t.toml("ranks", 400);
  const std::string hb = t.dir / "hb";
  fs::create_directories(hb);
  const std::string out = t.dir / "mpi.out", err = t.dir / "mpi.err";
  // mpirun in front: its own flags, then zaya's. ZAYA_SUPERVISE_DIR: the heartbeats name the pids.
  std::vector<std::string> argv = words(ZAYA_MPIRUN_FLAGS);
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(t.work.c_str()) != 0) _exit(126);
    setenv("ZAYA_SUPERVISE_DIR", hb.c_str(), 1);
    if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(126);
    std::vector<std::string> a = {ZAYA_MPIRUN};
    a.insert(a.end(), argv.begin(), argv.end());
    for (const char* x : {"-np", "2", ZAYA_BINARY, "train", "--config"}) a.push_back(x);
    a.push_back(cfg);
    std::vector<char*> p;
    for (std::string& x : a) p.push_back(x.data());
    p.push_back(nullptr);
    execv(ZAYA_MPIRUN, p.data());
    _exit(127);
  }
  // Rank 1's pid, once it has done 3 steps.
  pid_t rank1 = 0;
  for (int i = 0; i < 6000 && rank1 == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    try {
      const auto j = nlohmann::json::parse(slurp(hb + "/heartbeat_rank00001.json"));
      if (j["last_step"].get<int64_t>() >= 3) rank1 = j["pid"].get<pid_t>();
    } catch (const std::exception&) {
    }
  }
  ASSERT_GT(rank1, 0) << slurp(err);
  ASSERT_EQ(kill(rank1, SIGTERM), 0);
  const CliResult r = wait_zaya(pid, out, err);
  EXPECT_NE(r.code, 0) << r.out << r.err;
  const auto w = words(r.out);
  ASSERT_GE(w.size(), 9u) << r.out << r.err;
  EXPECT_EQ(w[3], "SIGTERM") << r.out;
  const int64_t n = std::stoll(w[6].substr(0, w[6].find('/')));
  const std::string ckpt = t.work + "/runs/ranks/" + checkpoint_dir_name(n);
  EXPECT_EQ(verify_checkpoint(ckpt), "");
  EXPECT_TRUE(fs::exists(ckpt + "/optimizer/optimizer_rank00001.safetensors"));
  EXPECT_NE(r.out.find("2 ranks wrote it"), std::string::npos) << r.out;
  // Both ranks stopped after step n: rank 0's heartbeat says so too.
  const auto hb0 = nlohmann::json::parse(slurp(hb + "/heartbeat_rank00000.json"));
  EXPECT_EQ(hb0["last_step"].get<int64_t>(), n) << hb0.dump();
}

// The newcomer's case: a tokenizer smaller than the model's vocabulary. The run warns, samples
// only ids the tokenizer decodes (after the final checkpoint), and saves a whole model.
TEST(TrainCli, AModelVocabularyLargerThanTheTokenizerTrainsSamplesAndSaves) {
  Tree t;
  const test::TokenizedDataset d = test::make_tokenized_dataset(t.dir, 300);
  const std::string cfg =
      t.toml("newcomer", 6, "", d.shards, "sample_tokens = 300\nsample_temperature = 5\n",
             "tokenizer = \"" + d.tokenizer + "\"\n");
  const CliResult r = run_at(t.work, {"train", "--config", cfg});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: the model's vocab_size is 512"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\nsample @ step 6: "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("no sample"), std::string::npos) << r.err;  // only ids it decodes
  const std::string model = t.work + "/runs/newcomer/step_00000006/model";
  EXPECT_EQ(slurp(model + "/tokenizer.json"), slurp(d.tokenizer));
  EXPECT_NE(r.out.find("model runs/newcomer/step_00000006/model"), std::string::npos) << r.out;
}

// Refused before step 1, one error line naming both sides; nothing is written.
TEST(TrainCli, MismatchesAreRefusedBeforeTheFirstStepNamingBothSides) {
  Tree t;
  const test::TokenizedDataset d = test::make_tokenized_dataset(t.dir, 300);
  const std::string other = test::make_tokenized_dataset(t.dir, 290).tokenizer;
  const std::string cfg = t.toml("mismatch", 4, "", d.shards);
  auto refused = [&](const std::vector<std::string>& sets, std::vector<std::string> parts) {
    std::vector<std::string> args = {"train", "--config", cfg, "--quiet"};
    for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
    const CliResult r = run_at(t.work, args);
    for (const std::string& p : parts) test::expect_user_error(r, p);
    EXPECT_FALSE(fs::exists(t.work + "/runs/mismatch/step_00000001"));
  };
  refused({"data.tokenizer=" + other},
          {"data.tokenizer = " + other +
               " (--set) is not the tokenizer the dataset was prepared "
               "with",
           hex64(file_checksum(other)), d.tokenizer, hex64(file_checksum(d.tokenizer))});
  refused({"data.seq_len=4096"}, {"data.seq_len = 4096 (--set)", "max_position_embeddings = 2048",
                                  "model.config = " + std::string(ZAYA_TEST_FIXTURES) +
                                      "/configs/tiny.json (in " + cfg + ")"});
  refused({"data.tokenizer=" + std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/toy_tokenizer.json",
           "data.dataset=" + t.shards},
          {"has 1024 tokens but the model's vocab_size is 512"});
}

// Resuming: another model.config is refused naming the fields; resume = "none" over the old
// checkpoints is refused unless checkpoint.overwrite; a finished run says so and exits 0.
TEST(TrainCli, ResumesThatWouldMixRunsAreRefusedAndAFinishedRunSaysSo) {
  Tree t;
  const std::string cfg = t.toml("again", 4);
  ASSERT_EQ(run_at(t.work, {"train", "--config", cfg, "--quiet"}).code, 0);
  const CliResult done = run_at(t.work, {"train", "--config", cfg, "--quiet"});
  ASSERT_EQ(done.code, 0) << done.err;
  EXPECT_EQ(done.out,
            "train: run already finished at step 4 (model runs/again/step_00000004/model); raise "
            "train.steps to continue\n");
  nlohmann::json j =
      nlohmann::json::parse(slurp(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json"));
  j["rope_theta"] = 5000;
  std::ofstream(t.configs + "/changed.json") << j.dump(2);
  test::expect_user_error(
      run_at(t.work, {"train", "--config", cfg, "--quiet", "--set", "train.steps=6", "--set",
                      "model.config=../configs/changed.json"}),
      "model.config = ../configs/changed.json (--set) is not the model of the "
      "checkpoint it resumes");
  const CliResult fresh =
      run_at(t.work, {"train", "--config", cfg, "--quiet", "--set", "checkpoint.resume=none"});
  test::expect_user_error(fresh,
                          "checkpoint.resume = none (--set) starts a new run, but "
                          "checkpoint.dir runs/again already holds 3 checkpoint(s)");
  const CliResult over =
      run_at(t.work, {"train", "--config", cfg, "--quiet", "--set", "checkpoint.resume=none",
                      "--set", "checkpoint.overwrite=true", "--set", "train.steps=3"});
  ASSERT_EQ(over.code, 0) << over.err;
  EXPECT_FALSE(fs::exists(t.work + "/runs/again/step_00000004"));
}

// Relative paths in the TOML are its folder's (from any working directory); --set paths are the
// working directory's; a missing file names the key, the TOML and the path; a missing TOML says so.
TEST(TrainCli, TomlPathsAreTheFilesFolderAndFileErrorsNameTheKey) {
  Tree t;
  fs::copy_file(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json", t.configs + "/tiny.json");
  fs::create_directories(t.dir / "elsewhere");
  const std::string cfg = t.configs + "/rel.toml";
  std::ofstream(cfg) << "[model]\nconfig = \"tiny.json\"\n[data]\ndataset = \"../shards\"\n"
                     << "seq_len = 16\n[train]\nmicro_batch = 2\nsteps = 2\neval_every = 0\n"
                     << "[checkpoint]\ndir = \"../runs/rel\"\n";
  const CliResult r =
      run_at(t.dir / "elsewhere", {"train", "--config", "../configs/rel.toml", "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(verify_checkpoint(t.dir / "runs/rel/step_00000002"), "");
  EXPECT_NE(r.out.find("model ../runs/rel/step_00000002/model"), std::string::npos) << r.out;

  std::ofstream(cfg) << "[model]\nconfig = \"nope.json\"\n[data]\ndataset = \"../shards\"\n";
  test::expect_user_error(
      run_at(t.dir / "elsewhere", {"train", "--config", "../configs/rel.toml", "--quiet"}),
      "model.config = nope.json (in ../configs/rel.toml): cannot open ../configs/nope.json: No "
      "such file or directory");
  // --set: the working directory's.
  test::expect_user_error(
      run_at(t.dir / "elsewhere", {"train", "--config", "../configs/rel.toml", "--quiet", "--set",
                                   "model.config=tiny.json"}),
      "model.config = tiny.json (--set): cannot open tiny.json");
  test::expect_user_error(run_at(t.work, {"train", "--config", "configs/missing.toml"}),
                          "cannot open configs/missing.toml: No such file or directory");
}

}  // namespace
}  // namespace zaya
