// `zaya template` end to end on the ZAYA1-8B-like directory (tests/chat_model_dir.h): the text is
// the model's own template rendered (generation prompt opening <think>, or closing it with
// enable_thinking false, or none), tools and request bodies are read, --ids tokenizes the special
// tokens as the single ids they are, and bad input is one "zaya: error:" line.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "chat_model_dir.h"
#include "cli_util.h"
#include "data/tokenizer.h"
#include "test_util.h"

namespace zaya {
namespace {

using test::expect_user_error;
using test::run_zaya_in;

const char* const kMessages =
    R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Héllo 👋"}])";
const char* const kTools =
    R"([{"type": "function", "function": {"name": "get_time", "description": "The time now",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}}}])";

struct TemplateDir {
  test::ScratchDir dir;
  std::string model = test::zaya_chat_model_dir();
  std::string messages = dir / "messages.json", tools = dir / "tools.json";
  TemplateDir() {
    std::ofstream(messages) << kMessages;
    std::ofstream(tools) << kTools;
  }
  test::CliResult run(const std::string& args, const std::string& in = "") {
    return run_zaya_in(dir.path, "template --model " + model + " " + args, in);
  }
};

#define NEED_FIXTURE() \
  if (test::zaya_chat_model_dir().empty()) GTEST_SKIP() << test::gemma3_missing_message()

TEST(CliTemplate, PrintsTheModelsTemplateRendered) {
  NEED_FIXTURE();
  TemplateDir t;
  const test::CliResult r = t.run("--messages " + t.messages);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHéllo 👋<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n");
  test::expect_contains(r.err, "chat_template.jinja");
  const test::CliResult off =
      t.run("--messages " + t.messages + " --kwargs '{\"enable_thinking\": false}'");
  ASSERT_EQ(off.code, 0) << off.err;
  EXPECT_TRUE(off.out.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n")) << off.out;
  const test::CliResult none = t.run("--messages " + t.messages + " --no-generation-prompt");
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_TRUE(none.out.ends_with("👋<|im_end|>\n")) << none.out;
}

TEST(CliTemplate, ReadsToolsAndRequestBodies) {
  NEED_FIXTURE();
  TemplateDir t;
  const test::CliResult r = t.run("--messages " + t.messages + " --tools " + t.tools);
  ASSERT_EQ(r.code, 0) << r.err;
  test::expect_contains(r.out,
                        "<tools><function><name>get_time</name><description>The time now"
                        "</description><parameters>{\"type\": \"object\", \"properties\": "
                        "{\"zone\": {\"type\": \"string\"}}}</parameters></function></tools>");
  // The same as one request body on standard input.
  const std::string body = std::string("{\"messages\": ") + kMessages + ", \"tools\": " + kTools +
                           ", \"chat_template_kwargs\": {\"enable_thinking\": false}}";
  const test::CliResult b = t.run("--messages -", body);
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(b.out.substr(0, r.out.size() - 8), r.out.substr(0, r.out.size() - 8));
  EXPECT_TRUE(b.out.ends_with("</think>\n\n"));
}

TEST(CliTemplate, IdsKeepSpecialTokensWhole) {
  NEED_FIXTURE();
  TemplateDir t;
  const test::CliResult text = t.run("--messages " + t.messages);
  const test::CliResult r = t.run("--messages " + t.messages + " --ids");
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<int32_t> ids;
  std::istringstream in(r.out);
  for (int32_t id; in >> id;) ids.push_back(id);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 105);  // <|im_start|>, not "<", "|", …
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 106), 2);
  const Tokenizer tok = Tokenizer::load(test::zaya_chat_model_dir() + "/tokenizer.json");
  EXPECT_EQ(tok.decode(ids), text.out);
}

TEST(CliTemplate, BadInputIsOneErrorLine) {
  NEED_FIXTURE();
  TemplateDir t;
  std::ofstream(t.dir / "bad.json") << "[{\"role\": \"user\", ";
  expect_user_error(t.run("--messages " + (t.dir / "bad.json")), "not valid JSON");
  std::ofstream(t.dir / "obj.json") << "{\"role\": \"user\"}";
  expect_user_error(t.run("--messages " + (t.dir / "obj.json")), "\"messages\"");
  // The template's own raise_exception is the message.
  std::ofstream(t.dir / "role.json") << R"([{"role": "narrator", "content": "x"}])";
  expect_user_error(t.run("--messages " + (t.dir / "role.json")), "narrator");
  expect_user_error(t.run("--messages " + t.messages + " --kwargs '[1]'"), "--kwargs");
  expect_user_error(t.run("--messages " + t.messages + " --kwargs '{'"), "--kwargs");
}

}  // namespace
}  // namespace zaya
