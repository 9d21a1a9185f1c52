// The readers of `zaya plot` (src/plot/run_data.h): the metrics file as the trainer writes it
// (null for a non-finite value, validation lines, a line still being written, the run going
// back), the goodput report as resilience/goodput.h writes it, where a run directory keeps them,
// and an error naming the file, the line and the key for every malformed input.
#include "plot/run_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "resilience/goodput.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::plot;
using zaya::test::expect_error;
using zaya::test::ScratchDir;
namespace fs = std::filesystem;

namespace {

// A metrics line as MetricsLog writes it (train/trainer.cpp's keys).
std::string line(int64_t step, double loss, int64_t skipped = 0) {
  nlohmann::json j = {{"step", step},
                      {"loss", loss},
                      {"grad_norm", 0.5 + step},
                      {"lr", 1e-3},
                      {"tokens", step * 4096},
                      {"tokens_per_s", 4000.0},
                      {"mfu", 0.37},
                      {"skipped", skipped},
                      {"expert_load_entropy", 0.9},
                      {"time", 1.5 * double(step)}};
  return j.dump() + "\n";
}

}  // namespace

TEST(RunData, ReadsTheTrainersLines) {
  const RunMetrics m = parse_metrics(line(1, 6.9) + line(2, 6.5) + line(3, 6.1), "m.jsonl");
  ASSERT_EQ(m.rows.size(), 3u);
  EXPECT_EQ(m.rows[2].step, 3);
  EXPECT_DOUBLE_EQ(m.rows[2].loss, 6.1);
  EXPECT_DOUBLE_EQ(m.rows[2].grad_norm, 3.5);
  EXPECT_DOUBLE_EQ(m.rows[2].lr, 1e-3);
  EXPECT_DOUBLE_EQ(m.rows[2].tokens, 3 * 4096);
  EXPECT_DOUBLE_EQ(m.rows[2].tokens_per_s, 4000);
  EXPECT_DOUBLE_EQ(m.rows[2].mfu, 0.37);
  EXPECT_DOUBLE_EQ(m.rows[2].expert_load_entropy, 0.9);
  EXPECT_DOUBLE_EQ(m.rows[2].time, 4.5);
  EXPECT_EQ(m.rows[2].skipped, 0);
  EXPECT_TRUE(m.val.empty());
  EXPECT_TRUE(m.rollbacks.empty());
  EXPECT_TRUE(m.skipped_steps.empty());
  EXPECT_FALSE(m.torn_last_line);
}

TEST(RunData, NullIsNotFiniteAndMissingKeysAreOptional) {
  // nlohmann's dump writes NaN and infinities as null, as the trainer's file has them.
  const std::string nan_line =
      nlohmann::json{{"step", 2}, {"loss", NAN}, {"grad_norm", INFINITY}}.dump() + "\n";
  EXPECT_NE(nan_line.find("null"), std::string::npos);
  const RunMetrics m = parse_metrics(line(1, 6.9) + nan_line, "m");
  ASSERT_EQ(m.rows.size(), 2u);
  EXPECT_TRUE(std::isnan(m.rows[1].loss));
  EXPECT_TRUE(std::isnan(m.rows[1].grad_norm));
  EXPECT_TRUE(std::isnan(m.rows[1].mfu));  // absent
  EXPECT_EQ(m.rows[1].skipped, -1);        // absent
}

TEST(RunData, SkippedStepsAreWhereTheCountGrows) {
  const RunMetrics m = parse_metrics(
      line(1, 6.9) + line(2, 60, 1) + line(3, 6.5, 1) + line(4, 90, 2) + line(5, 80, 3), "m");
  EXPECT_EQ(m.skipped_steps, (std::vector<int64_t>{2, 4, 5}));
}

TEST(RunData, ValidationLines) {
  // A line of its own at step 0, one on a step's own line, one after a step's line.
  const std::string text = "{\"step\":0,\"val_loss\":6.93}\n" + line(1, 6.9) +
                           nlohmann::json{{"step", 2}, {"loss", 6.5}, {"val_loss", 6.6}}.dump() +
                           "\n" + line(3, 6.1) + "{\"step\":3,\"val_loss\":6.2}\n";
  const RunMetrics m = parse_metrics(text, "m");
  ASSERT_EQ(m.rows.size(), 3u);
  ASSERT_EQ(m.val.size(), 3u);
  EXPECT_EQ(m.val[0].step, 0);
  EXPECT_DOUBLE_EQ(m.val[0].loss, 6.93);
  EXPECT_EQ(m.val[1].step, 2);
  EXPECT_EQ(m.val[2].step, 3);
  // Only validation lines: still something to draw.
  EXPECT_EQ(parse_metrics("{\"step\":0,\"val_loss\":6.93}\n", "m").val.size(), 1u);
}

TEST(RunData, ALineStillBeingWrittenIsLeftOut) {
  const std::string torn = line(3, 6.1).substr(0, 20);
  const RunMetrics m = parse_metrics(line(1, 6.9) + line(2, 6.5) + torn, "m");
  EXPECT_EQ(m.rows.size(), 2u);
  EXPECT_TRUE(m.torn_last_line);
  // A last line without a newline that parses is whole.
  const std::string whole = line(3, 6.1);
  const RunMetrics w = parse_metrics(line(1, 6.9) + whole.substr(0, whole.size() - 1), "m");
  EXPECT_EQ(w.rows.size(), 2u);
  EXPECT_FALSE(w.torn_last_line);
  // Blank lines and CRLF endings are fine.
  EXPECT_EQ(parse_metrics("\n" + line(1, 6.9) + "  \n{\"step\":2,\"loss\":6}\r\n", "m").rows.size(),
            2u);
}

TEST(RunData, GoingBackReplacesTheLinesAfterIt) {
  // Steps 1–6, then 4–8: a restart from step 3 whose file was not cut back.
  std::string text;
  for (int s = 1; s <= 6; ++s) text += line(s, 10 - s);
  text += "{\"step\":5,\"val_loss\":5.5}\n";
  for (int s = 4; s <= 8; ++s) text += line(s, 20 - s);
  const RunMetrics m = parse_metrics(text, "m");
  ASSERT_EQ(m.rows.size(), 8u);
  for (size_t i = 0; i < m.rows.size(); ++i) EXPECT_EQ(m.rows[i].step, int64_t(i) + 1);
  EXPECT_DOUBLE_EQ(m.rows[3].loss, 16);  // the second step 4
  ASSERT_EQ(m.rollbacks.size(), 1u);
  EXPECT_EQ(m.rollbacks[0].from, 6);
  EXPECT_EQ(m.rollbacks[0].to, 3);
  EXPECT_TRUE(m.val.empty());  // step 5's validation belonged to the discarded lineage
}

TEST(RunData, MalformedMetricsNameTheFileLineAndKey) {
  expect_error([] { parse_metrics("", "runs/x/metrics.jsonl"); },
               {"runs/x/metrics.jsonl", "empty"});
  expect_error([] { parse_metrics("\n\n", "m"); }, {"m: empty"});
  expect_error([] { parse_metrics("{\"step\":1,\"lo", "m"); }, {"m: no complete line yet"});
  expect_error([] { parse_metrics(line(1, 6.9) + "{\"step\": 2, oops}\n", "m.jsonl"); },
               {"m.jsonl line 2: not JSON", "train.metrics"});
  expect_error([] { parse_metrics("[1,2]\n", "m"); }, {"m line 1: not a JSON object"});
  expect_error([] { parse_metrics("{\"loss\":1}\n", "m"); }, {"m line 1", "no \"step\""});
  expect_error([] { parse_metrics("{\"step\":-1,\"loss\":1}\n", "m"); },
               {"m line 1", "\"step\" is -1", ">= 0"});
  expect_error([] { parse_metrics("{\"step\":1.5,\"loss\":1}\n", "m"); },
               {"m line 1", "\"step\" is 1.5"});
  expect_error([] { parse_metrics("{\"step\":1,\"loss\":\"low\"}\n", "m"); },
               {"m line 1", "\"loss\" is a string, not a number"});
  expect_error([] { parse_metrics("{\"step\":1,\"loss\":1,\"lr\":[1]}\n", "m"); },
               {"m line 1", "\"lr\" is an array"});
  expect_error([] { parse_metrics("{\"step\":1,\"loss\":1,\"skipped\":true}\n", "m"); },
               {"m line 1", "\"skipped\" is a boolean"});
  expect_error([] { parse_metrics("{\"step\":1,\"loss\":1,\"skipped\":-2}\n", "m"); },
               {"m line 1", "\"skipped\" is -2"});
  expect_error([] { parse_metrics("{\"step\":18446744073709551615,\"loss\":1}\n", "m"); },
               {"m line 1", "too large"});
  // The supervisor's events file is not a metrics file.
  expect_error(
      [] { parse_metrics("{\"event\":\"step\",\"step\":1,\"step_s\":0.5}\n", "events.jsonl"); },
      {"events.jsonl line 1", "neither \"loss\" nor \"val_loss\""});
  expect_error([] { read_metrics("/nonexistent/metrics.jsonl"); },
               {"/nonexistent/metrics.jsonl", "cannot open metrics file"});
}

namespace {

// A report as `zaya supervise` writes it: one crash, then a completed attempt with a rollback.
nlohmann::json real_report() {
  GoodputInput in;
  in.start_s = 0;
  in.end_s = 100;
  AttemptRecord a1;
  a1.attempt = 1;
  a1.launch_s = 2;
  a1.end_s = 40;
  a1.end = AttemptEnd::Crashed;
  a1.exit = "exit code 1";
  a1.cause = "rank 1: boom";
  a1.progress_stop_s = 35;
  a1.events = parse_events(
      "{\"event\":\"start\",\"setup_s\":3}\n{\"event\":\"step\",\"step\":1,\"step_s\":10,\"after_"
      "s\":1}\n"
      "{\"event\":\"step\",\"step\":2,\"step_s\":10,\"after_s\":1}\n");
  AttemptRecord a2;
  a2.attempt = 2;
  a2.launch_s = 42;
  a2.end_s = 98;
  a2.end = AttemptEnd::Completed;
  a2.events = parse_events(
      "{\"event\":\"start\",\"setup_s\":3,\"resumed_step\":1}\n"
      "{\"event\":\"step\",\"step\":2,\"step_s\":10,\"after_s\":1}\n"
      "{\"event\":\"step\",\"step\":3,\"step_s\":10,\"after_s\":1,\"skipped\":true}\n"
      "{\"event\":\"rollback\",\"step\":3,\"to_step\":2,\"seconds\":1}\n"
      "{\"event\":\"step\",\"step\":3,\"step_s\":10,\"after_s\":1}\n{\"event\":\"done\"}\n");
  in.attempts = {a1, a2};
  return goodput_report(in);
}

}  // namespace

TEST(RunData, ReadsTheSupervisorsGoodputReport) {
  const nlohmann::json r = real_report();
  const Goodput g = parse_goodput(r.dump(2), "goodput.json");
  EXPECT_EQ(g.outcome, "completed");
  EXPECT_DOUBLE_EQ(g.wall_s, r["wall_s"].get<double>());
  EXPECT_DOUBLE_EQ(g.productive_s, r["productive_s"].get<double>());
  EXPECT_DOUBLE_EQ(g.anomaly_s, r["anomaly_s"].get<double>());
  EXPECT_DOUBLE_EQ(g.setup_s, r["overhead"]["setup_s"].get<double>());
  EXPECT_DOUBLE_EQ(g.after_step_s, r["overhead"]["after_step_s"].get<double>());
  EXPECT_DOUBLE_EQ(g.detection_s + g.restart_s + g.recomputed_s + g.other_s,
                   r["failures_s"].get<double>());
  // Every second is in one part: the chart's parts add up to the wall time.
  EXPECT_NEAR(g.productive_s + g.before_launch_s + g.setup_s + g.after_step_s + g.shutdown_s +
                  g.anomaly_s + g.detection_s + g.restart_s + g.recomputed_s + g.other_s,
              g.wall_s, 1e-9 * g.wall_s + 1e-9);
  ASSERT_EQ(g.attempts.size(), 2u);
  EXPECT_EQ(g.attempts[0].outcome, "crash");
  EXPECT_EQ(g.attempts[0].cause, "rank 1: boom");
  EXPECT_DOUBLE_EQ(g.attempts[1].launch_s, 42);
  ASSERT_EQ(g.rollbacks.size(), 1u);
  EXPECT_EQ(g.rollbacks[0].from, 3);
  EXPECT_EQ(g.rollbacks[0].to, 2);
}

TEST(RunData, MalformedGoodputNamesTheKey) {
  nlohmann::json r = real_report();
  expect_error([] { parse_goodput("{", "g.json"); }, {"g.json: not JSON", "goodput report"});
  expect_error([] { parse_goodput("[]", "g.json"); }, {"g.json: not a JSON object"});
  nlohmann::json bad = r;
  bad.erase("wall_s");
  expect_error([&] { parse_goodput(bad.dump(), "g.json"); }, {"g.json: no \"wall_s\""});
  bad = r;
  bad["productive_s"] = "fast";
  expect_error([&] { parse_goodput(bad.dump(), "g.json"); },
               {"\"productive_s\" is a string, not a number"});
  bad = r;
  bad["overhead"] = 3;
  expect_error([&] { parse_goodput(bad.dump(), "g.json"); }, {"\"overhead\" is missing"});
  bad = r;
  bad["overhead"].erase("setup_s");
  expect_error([&] { parse_goodput(bad.dump(), "g.json"); },
               {"g.json \"overhead\": no \"setup_s\""});
  bad = r;
  bad["failures"][0] = 1;
  expect_error([&] { parse_goodput(bad.dump(), "g.json"); }, {"\"failures\"[0] is not an object"});
  bad = r;
  bad["attempts"][1]["end_s"] = nullptr;
  expect_error([&] { parse_goodput(bad.dump(), "g.json"); },
               {"g.json \"attempts\"[1]: \"end_s\" is null, not a number"});
  bad = r;
  bad["rollbacks"] = "none";
  expect_error([&] { parse_goodput(bad.dump(), "g.json"); }, {"\"rollbacks\" is a string"});
}

namespace {

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

}  // namespace

TEST(RunData, FindsARunsFiles) {
  ScratchDir dir;
  const fs::path run = fs::path(dir.path) / "runs" / "kjv";
  write(run / "metrics.jsonl", line(1, 6.9));
  write(run / "supervise" / "goodput.json", real_report().dump());
  fs::create_directories(run / "checkpoints" / "step_00000010");

  RunFiles f = find_run_files(run.string());
  EXPECT_EQ(f.metrics, (run / "metrics.jsonl").string());
  EXPECT_EQ(f.goodput, (run / "supervise" / "goodput.json").string());
  EXPECT_EQ(f.folder, run.string());

  // The checkpoint directory: the metrics file one level up.
  f = find_run_files((run / "checkpoints").string());
  EXPECT_EQ(f.metrics, (run / "metrics.jsonl").string());
  EXPECT_EQ(f.folder, (run / "checkpoints").string());

  // A file: a metrics file, or a goodput report whatever its name.
  f = find_run_files((run / "metrics.jsonl").string());
  EXPECT_EQ(f.metrics, (run / "metrics.jsonl").string());
  EXPECT_EQ(f.goodput, "");
  EXPECT_EQ(f.folder, run.string());
  write(run / "report.json", real_report().dump());
  f = find_run_files((run / "report.json").string());
  EXPECT_EQ(f.goodput, (run / "report.json").string());
  EXPECT_EQ(f.metrics, "");

  // Another name for the metrics file, alone in its folder (events.jsonl does not count).
  const fs::path other = fs::path(dir.path) / "other";
  write(other / "train.jsonl", line(1, 6.9));
  write(other / "events.jsonl", "{\"event\":\"start\"}\n");
  EXPECT_EQ(find_run_files(other.string()).metrics, (other / "train.jsonl").string());
  write(other / "more.jsonl", line(1, 6.9));
  expect_error([&] { find_run_files(other.string()); },
               {"no metrics.jsonl", "more.jsonl, train.jsonl", "zaya plot FILE"});

  // A supervisor's directory alone: the goodput report only.
  f = find_run_files((run / "supervise").string());
  EXPECT_EQ(f.metrics, "");
  EXPECT_EQ(f.goodput, (run / "supervise" / "goodput.json").string());
}

TEST(RunData, NoRunNoFilesAreErrors) {
  ScratchDir dir;
  expect_error([&] { find_run_files(dir / "missing"); }, {"missing: no such file or directory"});
  expect_error([&] { find_run_files(dir.path); }, {dir.path, "no metrics file", "train.metrics"});
}
