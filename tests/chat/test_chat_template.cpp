// Chat formats: where a model directory's template is found (flag, chat_template.jinja,
// tokenizer_config.json string or named list, built-in ChatML, transcript), message validation,
// the transcript's exact format, and the ZAYA1 template (tests/fixtures/chat_templates/zaya1.jinja)
// rendering tools, tool calls and tool results through ChatTemplate.
#include "chat/chat_template.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "data/tokenizer.h"
#include "io/json_parse.h"

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using zaya::ModelExtras;
using zaya::chat::ChatError;
using zaya::chat::ChatFormat;
using zaya::chat::ChatTemplate;

namespace {

const fs::path kTemplates = fs::path(ZAYA_TEST_FIXTURES) / "chat_templates";

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("zaya_chat_template_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
  }
};

ordered_json msgs(const char* json) {
  return ordered_json::parse(json);
}

std::string render_plain(const ChatTemplate& t, const char* messages) {
  return t.render(msgs(messages), nullptr, true, ordered_json::object());
}

TEST(ChatTemplate, LoadOrderFlagThenDirectoryThenTokenizerConfig) {
  TempDir d;
  d.write("tokenizer_config.json",
          R"({"bos_token": "<s>", "chat_template": "CONFIG {{ bos_token }}"})");
  d.write("chat_template.jinja", "DIR {{ messages | length }}");
  d.write("flag.jinja", "FLAG");
  const std::string dir = d.path.string();
  const ModelExtras x = zaya::read_model_extras(dir);
  const char* one = R"([{"role": "user", "content": "hi"}])";

  ChatTemplate t = ChatTemplate::load(dir, (d.path / "flag.jinja").string(), x, nullptr);
  EXPECT_EQ(t.format, ChatFormat::ModelTemplate);
  EXPECT_EQ(render_plain(t, one), "FLAG");

  t = ChatTemplate::load(dir, "", x, nullptr);
  EXPECT_EQ(t.origin, (d.path / "chat_template.jinja").string());
  EXPECT_EQ(render_plain(t, one), "DIR 1");

  fs::remove(d.path / "chat_template.jinja");
  t = ChatTemplate::load(dir, "", x, nullptr);
  EXPECT_EQ(t.format, ChatFormat::ModelTemplate);
  EXPECT_EQ(render_plain(t, one), "CONFIG <s>");

  d.write("tokenizer_config.json",
          R"({"chat_template": [{"name": "tool_use", "template": "TOOLS"},
                                {"name": "default", "template": "DEFAULT"}]})");
  t = ChatTemplate::load(dir, "", zaya::read_model_extras(dir), nullptr);
  EXPECT_EQ(render_plain(t, one), "DEFAULT");

  fs::remove(d.path / "tokenizer_config.json");
  t = ChatTemplate::load(dir, "", zaya::read_model_extras(dir), nullptr);
  EXPECT_EQ(t.format, ChatFormat::Transcript);
}

TEST(ChatTemplate, BrokenTemplatesAndConfigsNameTheFile) {
  TempDir d;
  d.write("chat_template.jinja", "{% for m in messages %}no end");
  try {
    ChatTemplate::load(d.path.string(), "", ModelExtras{}, nullptr);
    FAIL() << "no error";
  } catch (const zaya::Error& e) {
    EXPECT_NE(std::string(e.what()).find("chat_template.jinja:1:4"), std::string::npos) << e.what();
  }
  fs::remove(d.path / "chat_template.jinja");
  d.write("tokenizer_config.json", R"({"chat_template": [{"name": "other", "template": "x"}]})");
  try {
    ChatTemplate::load(d.path.string(), "", ModelExtras{}, nullptr);
    FAIL() << "no error";
  } catch (const zaya::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no template named \"default\""), std::string::npos);
  }
}

TEST(ChatTemplate, BuiltinChatMLWhenTheTokenizerHasItsTokens) {
  // The toy tokenizer with two of its added tokens renamed to ChatML's.
  ordered_json tj = zaya::parse_json_ordered([] {
    std::ifstream f(fs::path(ZAYA_TEST_FIXTURES) / "tokenizer" / "toy_tokenizer.json");
    return std::string(std::istreambuf_iterator<char>(f), {});
  }());
  TempDir d;
  d.write("plain.json", tj.dump());
  const zaya::Tokenizer plain = zaya::Tokenizer::load((d.path / "plain.json").string());
  EXPECT_EQ(ChatTemplate::load(d.path.string(), "", ModelExtras{}, &plain).format,
            ChatFormat::Transcript);
  auto rename = [&](size_t added, const std::string& to) {
    const std::string from = tj["added_tokens"][added]["content"];
    ordered_json& vocab = tj["model"]["vocab"];
    vocab[to] = vocab[from];
    vocab.erase(from);
    tj["added_tokens"][added]["content"] = to;
  };
  rename(0, "<|im_start|>");
  rename(3, "<|im_end|>");
  d.write("chatml.json", tj.dump());
  const zaya::Tokenizer tok = zaya::Tokenizer::load((d.path / "chatml.json").string());
  const ChatTemplate t = ChatTemplate::load(d.path.string(), "", ModelExtras{}, &tok);
  EXPECT_EQ(t.format, ChatFormat::BuiltinChatML);
  EXPECT_EQ(render_plain(t, R"([{"role": "system", "content": "Be brief."},
                               {"role": "user", "content": "Hi"}])"),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  const std::string with_tools =
      t.render(msgs(R"([{"role": "user", "content": "Weather?"},
               {"role": "assistant", "content": null, "tool_calls": [{"type": "function",
                 "function": {"name": "w", "arguments": "{\"city\": \"Oslo\"}"}}]},
               {"role": "tool", "content": "cold"}])"),
               msgs(R"([{"type": "function", "function": {"name": "w", "parameters": {}}}])"), true,
               msgs(R"({"enable_thinking": false})"));
  EXPECT_NE(with_tools.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"w\""),
            std::string::npos)
      << with_tools;
  EXPECT_NE(with_tools.find("<tool_call>\n{\"name\": \"w\", \"arguments\": {\"city\": \"Oslo\"}}"),
            std::string::npos)
      << with_tools;
  EXPECT_NE(with_tools.find("<|im_start|>user\n<tool_response>\ncold\n</tool_response><|im_end|>"),
            std::string::npos);
  EXPECT_TRUE(with_tools.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
}

TEST(ChatTemplate, TranscriptIsTheFormatServedBeforeTemplates) {
  const ChatTemplate t = ChatTemplate::load("", "", ModelExtras{}, nullptr);
  ASSERT_EQ(t.format, ChatFormat::Transcript);
  EXPECT_EQ(render_plain(t, R"([{"role": "system", "content": "S"},
                               {"role": "developer", "content": "D"},
                               {"role": "user", "content": [{"type": "text", "text": "a"},
                                                            {"type": "text", "text": "b"}]},
                               {"role": "assistant"},
                               {"role": "user", "content": "again"}])"),
            "System: S\n\nSystem: D\n\nUser: ab\n\nAssistant: \n\nUser: again\n\nAssistant:");
  EXPECT_EQ(t.stop_strings(), std::vector<std::string>{"\nUser:"});
  EXPECT_THROW(render_plain(t, R"([{"role": "tool", "content": "x"}])"), ChatError);
}

TEST(ChatTemplate, MessagesAreValidatedWithMessagesFitFor400) {
  const ChatTemplate t =
      ChatTemplate::from_source("{{ messages | tojson }}", "t", ChatFormat::ModelTemplate);
  auto error = [&](const char* m, const char* kwargs = "{}") {
    try {
      t.render(msgs(m), nullptr, true, msgs(kwargs));
    } catch (const ChatError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error("[]"), "'messages' must be a non-empty array of {role, content} objects");
  EXPECT_EQ(error(R"([{"role": "robot", "content": "x"}])"),
            "messages[0].role 'robot' is not one of system, developer, user, assistant, tool, "
            "function");
  EXPECT_EQ(error(R"([{"role": "user"}])"), "'messages[0].content' is required");
  EXPECT_EQ(error(R"([{"role": "user", "content": [{"type": "image_url"}]}])"),
            "'messages[0].content': only parts of the form {\"type\": \"text\", \"text\": "
            "\"...\"} are supported");
  EXPECT_NE(error(R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f",
                     "arguments": "{not json"}}]}])")
                .find("'messages[0].tool_calls[0].function.arguments' is not valid JSON"),
            std::string::npos);
  EXPECT_EQ(error(R"([{"role": "user", "content": "x"}])", R"({"messages": []})"),
            "'chat_template_kwargs' may not set 'messages'");
  // Key order is kept; argument strings become objects.
  EXPECT_EQ(t.render(msgs(R"([{"role": "assistant", "content": null, "tool_calls": [{"id": "c",
                              "function": {"name": "f", "arguments": "{\"z\": 1, \"a\": [2]}"}}]}])"),
                     nullptr, false, nullptr),
            "[{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c\", "
            "\"function\": {\"name\": \"f\", \"arguments\": {\"z\": 1, \"a\": [2]}}}]}]");
}

TEST(ChatTemplate, RaiseExceptionBecomesAChatErrorVerbatim) {
  const ChatTemplate t =
      ChatTemplate::load("", (kTemplates / "gemma.jinja").string(), ModelExtras{}, nullptr);
  try {
    render_plain(t, R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])");
    FAIL() << "no error";
  } catch (const ChatError& e) {
    EXPECT_STREQ(e.what(), "Conversation roles must alternate user/assistant/user/assistant/...");
  }
}

TEST(ChatTemplate, Zaya1TemplateRendersToolsCallsAndResults) {
  ModelExtras x;
  x.eos_token = "<|im_end|>";
  const ChatTemplate t = ChatTemplate::load("", (kTemplates / "zaya1.jinja").string(), x, nullptr);
  const ordered_json tools = msgs(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Weather now. ", "parameters": {"type": "object", "properties":
      {"city": {"type": "string"}, "days": {"type": "integer"}}}}}])");
  const std::string out = t.render(msgs(R"([{"role": "system", "content": "Be helpful."},
               {"role": "user", "content": "Weather in Oslo?"},
               {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1",
                 "type": "function", "function": {"name": "get_weather",
                 "arguments": "{\"city\": \"Oslo\", \"days\": 2}"}}]},
               {"role": "tool", "tool_call_id": "call_1", "content": "-3C"}])"),
                                   tools, true, msgs(R"({"enable_thinking": false})"));
  EXPECT_EQ(out,
            "<|im_start|>system\nBe helpful.\n\nYou may call the functions below. To call one, "
            "answer with\n<zyphra_tool_call>\n<function=NAME>\n<parameter=ARGUMENT>\nVALUE\n"
            "</parameter>\n</function>\n</zyphra_tool_call>\n\n<tools><function><name>get_weather"
            "</name><description>Weather now.</description><parameters>{\"type\": \"object\", "
            "\"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}}"
            "</parameters></function></tools><|im_end|>\n"
            "<|im_start|>user\nWeather in Oslo?<|im_end|>\n"
            "<|im_start|>assistant\n<zyphra_tool_call>\n<function=get_weather>\n<parameter=city>\n"
            "Oslo\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n"
            "</zyphra_tool_call><|im_end|>\n"
            "<|im_start|>user\n<zyphra_tool_response>\n-3C\n</zyphra_tool_response><|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_FALSE(zaya::chat::opens_reasoning(out));
  const std::string thinking =
      t.render(msgs(R"([{"role": "user", "content": "Hi"}])"), nullptr, true, nullptr);
  EXPECT_TRUE(thinking.ends_with("<|im_start|>assistant\n<think>\n"));
  EXPECT_TRUE(zaya::chat::opens_reasoning(thinking));
  EXPECT_TRUE(t.stop_strings().empty());
}

TEST(ChatTemplate, OpensReasoning) {
  EXPECT_TRUE(zaya::chat::opens_reasoning("a<think>\n"));
  EXPECT_FALSE(zaya::chat::opens_reasoning("a<think>x</think>b"));
  EXPECT_TRUE(zaya::chat::opens_reasoning("<think>x</think><think>"));
  EXPECT_FALSE(zaya::chat::opens_reasoning("no tags"));
}

}  // namespace
