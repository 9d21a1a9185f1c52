// The cost of grammar-constrained decoding (src/grammar/token_mask.h) on a real vocabulary: the
// time to build the VocabIndex, then mask_logits at a few grammar states — each state both cold
// (a grammar never masked with on this thread: every parse-state transition computed afresh) and
// warm (the same state again: transitions cached) — and a decode replayed token by token (a JSON
// document and a tool call, tokenized by the tokenizer itself: one mask per token, as the server
// does), mean and worst per token. One thread, as the mask runs.
// usage: bench_token_mask [tokenizer.json=build/tokenizer-cache/gemma3/tokenizer.json] [reps=20]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "grammar/tool_call_grammar.h"

using namespace zaya;
using namespace zaya::grammar;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150},
  "email":{"type":"string","format":"uuid"},"tags":{"type":"array","items":{"type":"string"}},
  "address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}},
             "required":["street","city"]}},"required":["name","age","tags","address"]})";

const char* kDoc =
    R"({"name": "Ada Lovelace, née Byron", "age": 36, "tags": ["mathematician", "writer", )"
    R"("analytical engine"], "address": {"street": "12 St James's Square", "city": "London"}})";

const char* kTools = R"([{"type":"function","function":{"name":"get_weather","parameters":{
  "type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]},
  "days":{"type":"integer"}},"required":["city"]}}}])";

const char* kCall =
    "<zyphra_tool_call>\n<function=get_weather>\n<parameter=city>\nSan Francisco, CA\n"
    "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</zyphra_tool_call>";

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "build/tokenizer-cache/gemma3/tokenizer.json";
  const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  auto t0 = Clock::now();
  const Tokenizer tok = Tokenizer::load(path);
  std::printf("tokenizer: %s, %lld ids, loaded in %.0f ms\n", path.c_str(),
              (long long)tok.vocab_size(), ms_since(t0));
  t0 = Clock::now();
  const VocabIndex vocab(tok);
  std::printf("VocabIndex: built in %.0f ms, %zu trie nodes\n", ms_since(t0), vocab.trie_nodes());
  const int32_t eos[] = {tok.eos_id(), 106};
  std::vector<float> logits(size_t(tok.vocab_size()));
  const auto schema = nlohmann::ordered_json::parse(kSchema);
  const auto tools = nlohmann::ordered_json::parse(kTools);

  struct Case {
    const char* what;
    int grammar;  // 0 schema, 1 any object, 2 tool calls
    std::string prefix;
  };
  const Case cases[] = {
      {"schema: start of object", 0, ""},
      {"schema: after a key", 0, R"({"name":)"},
      {"schema: mid-string", 0, R"({"name":"Ada Lov)"},
      {"schema: inside an integer", 0, R"({"name":"x","age":3)"},
      {"any object: start of a key", 1, R"({"a":1,)"},
      {"any object: mid-string", 1, R"({"a":"some te)"},
      {"tool call: start", 2, ""},
      {"tool call: mid raw string", 2,
       "<zyphra_tool_call>\n<function=get_weather>\n"
       "<parameter=city>\nSan Fr"},
  };
  auto make = [&](int which) {
    return which == 0   ? from_json_schema(schema)
           : which == 1 ? any_json_object()
                        : zaya_tool_calls(tools, "");
  };
  std::printf("\n%-30s %10s %10s %9s\n", "state", "cold ms", "warm ms", "allowed");
  for (const Case& c : cases) {
    std::vector<double> cold, warm;
    size_t allowed = 0;
    for (int r = 0; r < reps; ++r) {
      Matcher m(make(c.grammar));  // a new grammar: the thread's cache starts empty
      if (!m.accept(c.prefix)) {
        std::printf("prefix refused: %s\n", c.prefix.c_str());
        return 1;
      }
      std::fill(logits.begin(), logits.end(), 0.0f);
      auto t = Clock::now();
      mask_logits(vocab, m, eos, logits);
      cold.push_back(ms_since(t));
      t = Clock::now();
      mask_logits(vocab, m, eos, logits);
      warm.push_back(ms_since(t));
      allowed = size_t(std::count(logits.begin(), logits.end(), 0.0f));
    }
    std::sort(cold.begin(), cold.end());
    std::sort(warm.begin(), warm.end());
    std::printf("%-30s %10.2f %10.2f %9zu\n", c.what, cold[cold.size() / 2], warm[warm.size() / 2],
                allowed);
  }
  std::printf("\n(cold, warm: medians of %d)\n\n", reps);
  // Decodes replayed: one mask per token of the text, as the tokenizer splits it.
  const std::pair<const char*, std::pair<int, const char*>> decodes[] = {
      {"schema: the document", {0, kDoc}}, {"tool call", {2, kCall}}};
  std::printf("%-22s %7s %12s %12s %12s\n", "decode", "tokens", "mean ms/tok", "max ms/tok",
              "total ms");
  for (const auto& [what, d] : decodes) {
    const std::vector<int32_t> ids = tok.encode(d.second);
    std::vector<double> per;
    for (int r = 0; r < 3; ++r) {
      Matcher m(make(d.first));
      per.clear();
      for (int32_t id : ids) {
        std::fill(logits.begin(), logits.end(), 0.0f);
        const auto t = Clock::now();
        mask_logits(vocab, m, eos, logits);
        per.push_back(ms_since(t));
        if (logits[size_t(id)] != 0.0f || !m.accept(vocab.bytes(id))) {
          std::printf("%s: token %d (%s) refused\n", what, id, std::string(tok.token(id)).c_str());
          return 1;
        }
      }
    }
    double total = 0;
    for (double x : per) total += x;
    std::printf("%-22s %7zu %12.2f %12.2f %12.1f\n", what, ids.size(), total / double(per.size()),
                *std::max_element(per.begin(), per.end()), total);
  }
  return 0;
}
