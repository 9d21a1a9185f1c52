// zaya tokenize --tokenizer tokenizer.json [--text STR | --file F [--lines] | --jsonl F] [--bos]
//               [--decode]
// Encoding prints ids space-separated, one line per input: --text is one input; --file is one
// input, the whole file with its newlines (what data prepare and eval --text encode), or one per
// line with --lines; --jsonl one per line holding a JSON string (or an object with a "text"
// string), so texts may hold newlines; with none of them, each line of standard input (for
// typing at a terminal). No BOS unless --bos. --decode reverses it: each input line holds ids
// (whitespace-separated, or a JSON array) and prints its text, one per line; with --jsonl each
// text is printed as a JSON string instead.
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "core/assert.h"
#include "data/tokenizer.h"
#include "io/file.h"
#include "io/json_parse.h"

namespace zaya::cli {

namespace {

struct TokenizeArgs {
  std::string tokenizer, text, file, jsonl;
  bool has_text = false, bos = false, decode = false, lines = false;
};

// Calls fn(line, line_number) for every line of `path` ("-": standard input), without "\n"/"\r\n".
template <class F>
void for_each_line(const std::string& path, F&& fn) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    file.open(path, std::ios::binary);
    if (!file) fail("{}: cannot open input file", path);
    in = &file;
  }
  std::string line;
  for (int64_t n = 1; std::getline(*in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    fn(line, n);
  }
}

std::string where(const std::string& path, int64_t line) {
  return path == "-" ? fmt::format("standard input, line {}", line)
                     : fmt::format("{}, line {}", path, line);
}

std::vector<int32_t> parse_ids(const std::string& s, const std::string& at, int64_t vocab) {
  std::vector<int32_t> ids;
  const size_t first = s.find_first_not_of(" \t");
  if (first != std::string::npos && s[first] == '[') {
    nlohmann::json j;
    try {
      j = parse_json(s);
    } catch (const JsonError&) {
      fail("{}: not a JSON array of token ids", at);
    }
    for (const auto& v : j) {
      if (!v.is_number_integer()) fail("{}: {} is not a token id", at, v.dump());
      ids.push_back(v.get<int32_t>());
    }
  } else {
    const auto sep = [](char c) { return std::isspace(static_cast<unsigned char>(c)) || c == ','; };
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && sep(s[i])) ++i;
      if (i == s.size()) break;
      size_t j = i;
      while (j < s.size() && !sep(s[j])) ++j;
      const std::string word = s.substr(i, j - i);
      char* end = nullptr;
      const long long v = std::strtoll(word.c_str(), &end, 10);
      if (*end != '\0' || word.empty()) fail("{}: '{}' is not a token id", at, word);
      if (v < 0 || v >= vocab)
        fail("{}: token id {} is outside the vocabulary [0, {})", at, v, vocab);
      ids.push_back(int32_t(v));
      i = j;
    }
  }
  for (int32_t id : ids)
    if (id < 0 || id >= vocab)
      fail("{}: token id {} is outside the vocabulary [0, {})", at, id, vocab);
  return ids;
}

std::string jsonl_text(const std::string& line, const std::string& at) {
  nlohmann::json j;
  try {
    j = parse_json(line);
  } catch (const JsonError&) {
    fail("{}: not valid JSON (--jsonl wants one JSON string per line)", at);
  }
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("text") && j["text"].is_string())
    return j["text"].get<std::string>();
  fail("{}: expected a JSON string (or an object with a \"text\" string)", at);
}

int run_tokenize(const TokenizeArgs& a) {
  const Tokenizer tok = Tokenizer::load(a.tokenizer);
  if (a.bos && tok.bos_id() < 0)
    fail("{}: --bos given but the tokenizer has no <bos> token", a.tokenizer);
  std::string out;
  auto flush = [&](bool force) {
    if (force || out.size() > (1 << 16)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  };
  auto encode = [&](const std::string& text) {
    std::vector<int32_t> ids;
    if (a.bos) ids.push_back(tok.bos_id());
    tok.encode(text, ids);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ' ';
      out += std::to_string(ids[i]);
    }
    out += '\n';
    flush(false);
  };
  auto decode = [&](const std::string& line, const std::string& at, bool as_json) {
    const std::string text = tok.decode(parse_ids(line, at, tok.vocab_size()));
    out += as_json
               ? nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
               : text;
    out += '\n';
    flush(false);
  };

  if (a.has_text) {
    if (a.decode)
      decode(a.text, "--text", false);
    else
      encode(a.text);
  } else if (!a.jsonl.empty()) {
    for_each_line(a.jsonl, [&](const std::string& line, int64_t n) {
      if (a.decode)
        decode(line, where(a.jsonl, n), true);
      else
        encode(jsonl_text(line, where(a.jsonl, n)));
    });
  } else if (!a.file.empty() && !a.lines && !a.decode) {
    encode(read_text_file(a.file, "input file"));  // one text, newlines and all
  } else {
    const std::string path = a.file.empty() ? "-" : a.file;
    for_each_line(path, [&](const std::string& line, int64_t n) {
      if (a.decode)
        decode(line, where(path, n), false);
      else
        encode(line);
    });
  }
  flush(true);
  return 0;
}

}  // namespace

Action add_tokenize_command(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* sub = app.add_subcommand("tokenize", "Encode text to token ids, or decode ids to text");
  sub->add_option("--tokenizer", args->tokenizer, "tokenizer.json (Hugging Face format)")
      ->required();
  auto* text = sub->add_option("--text", args->text, "one text to encode (or ids to decode)");
  auto* file = sub->add_option("--file", args->file,
                               "encode this file as one text, newlines included (with --lines: "
                               "each line on its own); with --decode, lines of ids");
  auto* jsonl = sub->add_option("--jsonl", args->jsonl,
                                "encode every line of this file, each a JSON string (texts may "
                                "hold newlines); with --decode, print JSON strings");
  auto* lines = sub->add_flag("--lines", args->lines,
                              "with --file: encode each line on its own, one line of ids each");
  text->excludes(file)->excludes(jsonl);
  file->excludes(jsonl);
  lines->needs(file);
  auto* bos = sub->add_flag("--bos", args->bos, "start every sequence with the BOS token");
  sub->add_flag("--decode", args->decode, "decode lines of token ids to text")->excludes(bos);
  return [args, text] {
    args->has_text = text->count() > 0;
    return run_tokenize(*args);
  };
}

}  // namespace zaya::cli
