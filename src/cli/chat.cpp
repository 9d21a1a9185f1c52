// `zaya chat`: a conversation with a chat model in the terminal (docs/chat.md). Each turn renders
// the whole history through the model's chat template (chat/chat_template.h), decodes the answer
// on this thread and streams it: reasoning (between <think> and </think>) dimmed, the answer plain,
// then a tokens/s line on stderr. Commands: /reset, /system TEXT, /think on|off, /save FILE, /help,
// /exit. Ctrl-C stops the current answer (what was said so far stays in the history); Ctrl-C at the
// prompt drops the line being typed; Ctrl-D at an empty prompt exits. `-p TEXT` answers one message
// and exits. When stdout is not a terminal the output is plain text (no prompt, no colour) and the
// reasoning goes to stderr, so `zaya chat -p … > answer.txt` keeps only the answer.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "chat/reasoning.h"
#include "cli/commands.h"
#include "cli/sampling_flags.h"
#include "core/assert.h"
#include "core/enum_words.h"
#include "core/log.h"
#include "core/timer.h"
#include "data/tokenizer.h"
#include "infer/engine.h"
#include "infer/infer_model.h"
#include "infer/model_files.h"
#include "infer/model_source.h"
#include "io/file.h"

namespace zaya::cli {

namespace {

using ojson = nlohmann::ordered_json;

struct ChatArgs {
  std::string model, tokenizer, chat_template, system, prompt;
  SamplingFlags flags;
  int64_t max_tokens = 0, max_context = 0;
  chat::Reasoning reasoning = chat::Reasoning::On;
  bool bf16 = false, quiet = false;
};

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_sigint(int) {
  g_interrupted = 1;
}

// SIGINT sets a flag instead of ending the process, and interrupts a blocked read (no SA_RESTART).
void install_sigint() {
  struct sigaction sa = {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
}

enum class ReadResult { Line, End, Interrupted };

// One line of standard input (without its newline), read with read(2) so that Ctrl-C interrupts
// it. A last line without a newline is a line; End only when nothing is left.
ReadResult read_line(std::string& line) {
  static std::string buffer;
  line.clear();
  for (;;) {
    if (const size_t nl = buffer.find('\n'); nl != std::string::npos) {
      line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return ReadResult::Line;
    }
    char chunk[4096];
    const ssize_t n = ::read(0, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) {
      if (g_interrupted) {
        g_interrupted = 0;
        buffer.clear();
        return ReadResult::Interrupted;
      }
      continue;
    }
    if (n <= 0) {
      if (buffer.empty()) return ReadResult::End;
      line.swap(buffer);
      buffer.clear();
      return ReadResult::Line;
    }
    buffer.append(chunk, size_t(n));
  }
}

// Where each kind of text goes, and how it looks.
struct Terminal {
  bool out_tty = isatty(1) != 0, err_tty = isatty(2) != 0, in_tty = isatty(0) != 0;
  void answer(const std::string& s) const {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  }
  void reasoning(const std::string& s) const {
    if (s.empty()) return;
    if (out_tty) {
      answer("\x1b[2m" + s + "\x1b[0m");
    } else {
      std::fwrite(s.data(), 1, s.size(), stderr);
      std::fflush(stderr);
    }
  }
  void note(const std::string& s) const {  // status lines, on stderr
    const std::string line = err_tty ? "\x1b[2m" + s + "\x1b[0m\n" : s + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }
};

const char* const kHelp =
    "commands: /reset (forget the conversation), /system TEXT (set the system message; empty "
    "clears it), /think on|off (reasoning), /save FILE (the conversation as OpenAI messages "
    "JSON), /exit. Ctrl-C stops an answer, Ctrl-D exits.";

class ChatSession {
 public:
  ChatSession(const ChatArgs& a, const Terminal& term) : a_(a), term_(term) {
    const ModelSource src = open_model_source(a.model);
    if (const std::string line = src.line(); !line.empty()) log_info("chat: {}", line);
    const ModelExtras& extras = src.extras;
    SourceTokenizer st = src.require_tokenizer(a.tokenizer);
    const std::string tok_path = st.origin;
    tok_ = std::move(st.tok);
    tmpl_ = std::make_unique<chat::ChatTemplate>(src.chat_template(a.chat_template, tok_.get()));
    sampling_ = resolve_sampling(a.flags, default_sampling(extras));
    sampling_.validate();
    model_ = std::make_unique<InferModel>(src.load_weights(a.bf16));
    const ZayaConfig& c = model_->config();
    const ContextLimit ctx = choose_context(c, extras, a.max_context);
    for (const std::string& w : ctx.warnings) fmt::print(stderr, "zaya: warning: {}\n", w);
    if (const std::string w = tokenizer_fit_warning(*tok_, tok_path, c, extras.vocab_size_origin);
        !w.empty())
      fmt::print(stderr, "zaya: warning: {}\n", w);
    bos_ = bos_id(c, extras, tok_.get());
    EngineOptions eo;
    eo.max_batch = 1;
    eo.max_context = ctx.tokens;
    eo.eos_ids = eos_ids(c, extras, tok_.get());
    engine_ = std::make_unique<Engine>(*model_, tok_.get(), eo);
    thinking_ = a.reasoning == chat::Reasoning::On;
    if (!a.system.empty()) system_ = a.system;
    log_info("chat: {} ({}, {}), context {} tokens", src.path, tmpl_->origin,
             enum_word(tmpl_->format), engine_->max_context());
  }

  // One user message → one streamed answer. False when the message did not fit (history kept).
  bool turn(const std::string& user) {
    messages_.push_back({{"role", "user"}, {"content", user}});
    ojson all = ojson::array();
    if (!system_.empty()) all.push_back({{"role", "system"}, {"content", system_}});
    for (const ojson& m : messages_) all.push_back(m);
    std::string text;
    std::vector<int32_t> ids;
    try {
      text = tmpl_->render(all, nullptr, true, ojson{{"enable_thinking", thinking_}});
      ids = chat::prompt_ids(*tmpl_, *tok_, text, bos_);
    } catch (const Error& e) {
      messages_.erase(messages_.size() - 1);
      term_.note(fmt::format("chat: {}", e.what()));
      return false;
    }
    const int64_t P = int64_t(ids.size()), ctx = engine_->max_context();
    if (P >= ctx) {
      messages_.erase(messages_.size() - 1);
      term_.note(fmt::format(
          "chat: the conversation is {} tokens with this message, the context {}: /reset to "
          "start over",
          P, ctx));
      return false;
    }
    GenerationRequest req;
    req.prompt = std::move(ids);
    req.sampling = sampling_;
    req.sampling.seed = sampling_.seed + turns_++;
    req.sampling.max_new_tokens = a_.max_tokens > 0 ? std::min(a_.max_tokens, ctx - P) : ctx - P;
    for (const std::string& s : tmpl_->stop_strings()) req.sampling.stop.push_back(s);

    chat::ReasoningSplitter split(chat::opens_reasoning(text));
    std::string answer, reasoning;
    bool done = false, in_reasoning = false;
    FinishReason why = FinishReason::None;
    int64_t generated = 0;
    auto show = [&](const chat::ReasoningSplitter::Delta& d) {
      if (!d.reasoning.empty()) {
        term_.reasoning(d.reasoning);
        reasoning += d.reasoning;
        in_reasoning = true;
      }
      if (!d.content.empty()) {
        if (in_reasoning) term_.reasoning("\n");  // the answer starts on a line of its own
        in_reasoning = false;
        term_.answer(d.content);
        answer += d.content;
      }
    };
    const uint64_t id = engine_->submit(std::move(req), [&](const GenerationEvent& ev) {
      show(split.push(ev.text));
      generated = ev.completion_tokens;
      if (ev.done) done = true, why = ev.finish_reason;
    });
    Timer timer;
    g_interrupted = 0;
    bool cancelled = false;
    while (!done) {
      if (g_interrupted && !cancelled) {
        g_interrupted = 0;
        engine_->cancel(id);
        cancelled = true;
      }
      engine_->step();
    }
    show(split.finish());
    term_.answer("\n");
    const double s = timer.seconds();
    term_.note(fmt::format("[{} tokens, {:.1f} tokens/s{}]", generated,
                           s > 0 ? double(generated) / s : 0.0,
                           cancelled                     ? ", stopped"
                           : why == FinishReason::Length ? ", stopped at the token limit"
                                                         : ""));
    ojson reply = {{"role", "assistant"}, {"content", answer}};
    if (!reasoning.empty()) reply["reasoning_content"] = reasoning;
    messages_.push_back(std::move(reply));
    return true;
  }

  // A line starting with '/'. False for /exit.
  bool command(const std::string& line) {
    const size_t sp = line.find(' ');
    const std::string cmd = line.substr(0, sp);
    const std::string arg = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (cmd == "/exit" || cmd == "/quit") return false;
    if (cmd == "/reset") {
      messages_.clear();
      term_.note("chat: conversation cleared");
    } else if (cmd == "/system") {
      system_ = arg;
      term_.note(arg.empty() ? "chat: no system message" : "chat: system message set");
    } else if (cmd == "/think" && (arg == "on" || arg == "off")) {
      thinking_ = arg == "on";
      term_.note(fmt::format("chat: reasoning {}", arg));
    } else if (cmd == "/save" && !arg.empty()) {
      ojson all = ojson::array();
      if (!system_.empty()) all.push_back({{"role", "system"}, {"content", system_}});
      for (const ojson& m : messages_) all.push_back(m);
      try {
        write_file(arg, all.dump(2) + "\n", WriteMode{.atomic = true, .fsync = false});
        term_.note(fmt::format("chat: saved {} messages to {}", all.size(), arg));
      } catch (const Error& e) {
        term_.note(fmt::format("chat: {}", e.what()));
      }
    } else if (cmd == "/help") {
      term_.note(kHelp);
    } else {
      term_.note(fmt::format("chat: unknown command '{}'; {}", line, kHelp));
    }
    return true;
  }

 private:
  const ChatArgs& a_;
  const Terminal& term_;
  std::string system_;
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<chat::ChatTemplate> tmpl_;
  std::unique_ptr<InferModel> model_;
  std::unique_ptr<Engine> engine_;
  SamplingParams sampling_;
  int32_t bos_ = -1;
  bool thinking_ = true;
  uint64_t turns_ = 0;
  ojson messages_ = ojson::array();  // the conversation without the system message
};

int run_chat(const ChatArgs& a) {
  if (a.quiet) set_log_level(LogLevel::Quiet);
  const Terminal term;
  ChatSession session(a, term);
  install_sigint();
  if (!a.prompt.empty()) return session.turn(a.prompt) ? 0 : 1;
  if (term.in_tty) term.note(fmt::format("chat: {} Ctrl-D exits.", "/help for commands."));
  std::string line;
  for (;;) {
    if (term.in_tty && term.out_tty) term.answer("> ");
    const ReadResult r = read_line(line);
    if (r == ReadResult::End) {
      if (term.in_tty && term.out_tty) term.answer("\n");
      return 0;
    }
    if (r == ReadResult::Interrupted) {
      if (term.out_tty) term.answer("\n");
      continue;
    }
    if (line.empty()) continue;
    if (line[0] == '/') {
      if (!session.command(line)) return 0;
      continue;
    }
    session.turn(line);
  }
}

}  // namespace

Action add_chat_command(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  CLI::App* sub = app.add_subcommand("chat", "Chat with a model in the terminal");
  sub->add_option("--model", a->model,
                  "model directory, GGUF file, checkpoint (step_N), run (its newest valid "
                  "checkpoint) or a file in a model directory")
      ->required();
  sub->add_option("-p,--prompt", a->prompt, "answer this one message and exit");
  sub->add_option("--system", a->system, "the system message");
  add_enum_option(sub, "--reasoning", a->reasoning,
                  "whether the model reasons before answering (/think switches it)");
  sub->add_option("--max-tokens", a->max_tokens,
                  "tokens per answer at most (default: the rest of the context)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  sub->add_option("--max-context", a->max_context,
                  "prompt + answer tokens at most (default: the trained context)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  add_sampling_options(sub, a->flags);
  sub->add_option("--chat-template", a->chat_template,
                  "a Jinja chat template file to use instead of the model's")
      ->check(CLI::ExistingFile);
  sub->add_option("--tokenizer", a->tokenizer,
                  "tokenizer.json (default: DIR/tokenizer.json, or the GGUF file's)")
      ->check(CLI::ExistingFile);
  sub->add_flag("--bf16", a->bf16, "hold F32 matrices as bf16 (half the bytes per token)");
  sub->add_flag("--quiet", a->quiet, "no load lines on stderr");
  return [a] { return run_chat(*a); };
}

}  // namespace zaya::cli
