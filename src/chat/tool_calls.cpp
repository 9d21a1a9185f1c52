// ToolCallParser (chat/tool_calls.h): content text flows through a small buffer that holds back a
// possible tag; a call's text is collected until its closing tag and then parsed once, so that a
// call is either wholly a call or wholly content and nothing streamed has to be taken back.
#include "chat/tool_calls.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "chat/reasoning.h"
#include "io/json_parse.h"

namespace zaya::chat {

namespace {
using ojson = nlohmann::ordered_json;

constexpr std::string_view kCallOpen = "<zyphra_tool_call>";
constexpr std::string_view kCallClose = "</zyphra_tool_call>";
constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParamOpen = "<parameter=";
constexpr std::string_view kParamClose = "</parameter>";
// What content holds back a partial match of: the call's opening tag with the newline before it,
// and the closing tags that are dropped when stray.
constexpr std::array<std::string_view, 4> kContentHeld = {"\n<zyphra_tool_call>", kCallOpen,
                                                          kCallClose, kFunctionClose};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string dump(const ojson& j) {
  // Model text may be invalid UTF-8: replaced, never a throw.
  return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

// The value as JSON, or discarded. The same depth limit as io/json_parse.h's parse_json (whose
// nlohmann::json would lose an object value's key order).
ojson try_json(std::string_view text) {
  if (json_depth_violation(text) >= 0) return ojson(ojson::value_t::discarded);
  try {
    return ojson::parse(text, nullptr, /*allow_exceptions=*/false);
  } catch (const nlohmann::json::exception&) {  // defensive: allow_exceptions=false reports all
    return ojson(ojson::value_t::discarded);
  }
}

// The JSON types a parameter's schema allows, in the order to try them; "" for "any JSON".
void schema_types(const ojson& schema, std::vector<std::string>& types, int depth = 0) {
  if (!schema.is_object() || depth > 8) {
    types.emplace_back();
    return;
  }
  if (const auto t = schema.find("type"); t != schema.end()) {
    if (t->is_string()) {
      types.push_back(t->get<std::string>());
      return;
    }
    if (t->is_array()) {
      for (const ojson& e : *t) types.push_back(e.is_string() ? e.get<std::string>() : "");
      return;
    }
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (const auto alts = schema.find(key); alts != schema.end() && alts->is_array()) {
      for (const ojson& alt : *alts) schema_types(alt, types, depth + 1);
      return;
    }
  }
  if (const auto e = schema.find("enum");
      e != schema.end() && e->is_array() && !e->empty() &&
      std::all_of(e->begin(), e->end(), [](const ojson& v) { return v.is_string(); })) {
    types.emplace_back("string");
    return;
  }
  if (const auto c = schema.find("const"); c != schema.end() && c->is_string()) {
    types.emplace_back("string");
    return;
  }
  types.emplace_back();
}

// raw: the text between "<parameter=NAME>" and its end; schema: its property schema, or null.
ojson typed_value(std::string_view raw, const ojson* schema) {
  std::string_view text = raw;
  if (text.starts_with('\n')) text.remove_prefix(1);
  if (text.ends_with('\n')) text.remove_suffix(1);
  std::vector<std::string> types;
  if (schema) {
    schema_types(*schema, types);
  } else {
    types.emplace_back();
  }
  bool parsed_once = false;
  ojson parsed;
  auto json = [&]() -> const ojson& {
    if (!parsed_once) parsed = try_json(text), parsed_once = true;
    return parsed;
  };
  for (const std::string& t : types) {
    if (t == "string") return std::string(text);
    if (t == "boolean") {
      std::string lower(trim(text));
      for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
      if (lower == "true" || lower == "false") return lower == "true";
      continue;
    }
    const ojson& j = json();
    if (j.is_discarded()) continue;
    if (t.empty() || (t == "integer" && j.is_number_integer()) ||
        (t == "number" && j.is_number()) || (t == "null" && j.is_null()) ||
        (t == "object" && j.is_object()) || (t == "array" && j.is_array()))
      return j;
    if (t != "integer" && t != "number" && t != "null" && t != "object" && t != "array")
      return j;  // a type name JSON Schema does not have: any JSON
  }
  const ojson& j = json();
  return j.is_discarded() ? ojson(std::string(text)) : j;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::string tool_call_id(uint64_t id_seed, int index) {
  static constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  uint64_t state = id_seed;
  uint64_t mix = uint64_t(uint32_t(index)) + 1;
  state ^= splitmix64(mix);  // the index moves the whole stream, not just its start
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[splitmix64(state) % kAlphabet.size()];
  return id;
}

ToolCallParser::ToolCallParser(const nlohmann::ordered_json& tools, uint64_t id_seed)
    : id_seed_(id_seed) {
  if (!tools.is_array()) return;
  for (const ojson& tool : tools) {
    if (!tool.is_object()) continue;
    const auto f = tool.find("function");
    const ojson& fn = (f != tool.end() && f->is_object()) ? *f : tool;
    const auto name = fn.find("name");
    if (name == fn.end() || !name->is_string()) continue;
    ojson properties;  // null: no schema for any parameter
    if (const auto p = fn.find("parameters"); p != fn.end() && p->is_object())
      if (const auto props = p->find("properties"); props != p->end() && props->is_object())
        properties = *props;
    tools_.emplace(name->get<std::string>(), std::move(properties));  // the first declaration wins
  }
}

ToolCallParser::Delta ToolCallParser::push(std::string_view text) {
  Delta out;
  pending_.append(text);
  process(false, out);
  return out;
}

ToolCallParser::Delta ToolCallParser::finish() {
  Delta out;
  process(true, out);
  held_ws_.clear();  // whitespace after the last call
  after_call_ = false;
  return out;
}

void ToolCallParser::emit_content(std::string_view text, Delta& out) {
  if (after_call_) {
    size_t ws = 0;
    while (ws < text.size() && is_space(text[ws])) ++ws;
    held_ws_.append(text.substr(0, ws));
    text.remove_prefix(ws);
    if (text.empty()) return;
    out.content += held_ws_;
    held_ws_.clear();
    after_call_ = false;
  }
  out.content.append(text);
}

void ToolCallParser::process(bool final, Delta& out) {
  for (;;) {
    if (phase_ == Phase::Content) {
      // The first tag in the buffer: a call's start, or a stray closing tag (dropped).
      size_t at = std::string::npos;
      std::string_view tag;
      for (std::string_view t : {kCallOpen, kCallClose, kFunctionClose}) {
        const size_t p = pending_.find(t);
        if (p < at) at = p, tag = t;
      }
      if (at == std::string::npos) {
        size_t n = pending_.size();
        if (!final) {
          size_t hold = 0;
          for (std::string_view t : kContentHeld)
            hold = std::max(hold, partial_tag_suffix(pending_, t));
          n -= hold;
          n -= incomplete_utf8_tail(std::string_view(pending_).substr(0, n));
        }
        emit_content(std::string_view(pending_).substr(0, n), out);
        pending_.erase(0, n);
        return;
      }
      std::string_view before = std::string_view(pending_).substr(0, at);
      if (tag != kCallOpen) {
        emit_content(before, out);
        pending_.erase(0, at + tag.size());
        continue;
      }
      std::string lead;
      if (before.ends_with('\n')) {
        before.remove_suffix(1);
        lead = "\n";
      }
      emit_content(before, out);
      if (after_call_) {  // only whitespace since the last call: part of the lead
        lead = held_ws_ + lead;
        held_ws_.clear();
        after_call_ = false;
      }
      call_lead_ = std::move(lead);
      body_ = pending_.substr(at + tag.size());
      pending_.clear();
      scan_ = 0;
      phase_ = Phase::Call;
      continue;
    }

    // Call: collect the body up to "</zyphra_tool_call>"; another "<zyphra_tool_call>" first
    // means this call was never closed.
    body_.append(pending_);
    pending_.clear();
    const size_t close = body_.find(kCallClose, scan_);
    const size_t reopen = body_.find(kCallOpen, scan_);
    if (close != std::string::npos && close < reopen) {
      const std::string_view body = std::string_view(body_).substr(0, close);
      if (parse_call(body, out)) {
        after_call_ = true;
        held_ws_.clear();
      } else {
        out.content += call_lead_;
        out.content += kCallOpen;
        out.content += body;
        out.content += kCallClose;
      }
      pending_ = body_.substr(close + kCallClose.size());
      body_.clear();
      phase_ = Phase::Content;
      continue;
    }
    if (reopen != std::string::npos) {
      std::string_view raw = std::string_view(body_).substr(0, reopen);
      std::string lead;
      if (raw.ends_with('\n')) {
        raw.remove_suffix(1);
        lead = "\n";
      }
      out.content += call_lead_;
      out.content += kCallOpen;
      out.content += raw;
      call_lead_ = std::move(lead);
      body_.erase(0, reopen + kCallOpen.size());
      scan_ = 0;
      continue;
    }
    if (final) {
      out.content += call_lead_;
      out.content += kCallOpen;
      out.content += body_;
      body_.clear();
      phase_ = Phase::Content;
      continue;  // pending_ is empty: the content branch returns
    }
    // Neither tag yet: the next search starts where a tag could still begin.
    const size_t keep = std::max(kCallClose.size(), kCallOpen.size()) - 1;
    scan_ = body_.size() > keep ? body_.size() - keep : 0;
    return;
  }
}

bool ToolCallParser::parse_call(std::string_view body, Delta& out) {
  struct Parsed {
    std::string name;
    ojson arguments;
  };
  std::vector<Parsed> functions;
  size_t pos = 0;
  auto skip_space = [&] {
    while (pos < body.size() && is_space(body[pos])) ++pos;
  };
  auto at = [&](std::string_view tag) { return body.substr(pos).starts_with(tag); };
  // "<TAG=NAME>": the name, trimmed; false when the ">" is missing or the name empty.
  auto tag_name = [&](std::string_view tag, std::string& name) {
    pos += tag.size();
    const size_t gt = body.find('>', pos);
    if (gt == std::string_view::npos) return false;
    name = std::string(trim(body.substr(pos, gt - pos)));
    pos = gt + 1;
    return !name.empty();
  };
  for (;;) {
    skip_space();
    if (pos == body.size()) break;
    if (!at(kFunctionOpen)) return false;
    Parsed fn;
    if (!tag_name(kFunctionOpen, fn.name)) return false;
    const auto tool = tools_.find(fn.name);
    if (tool == tools_.end()) return false;
    const ojson& properties = tool->second;
    fn.arguments = ojson::object();
    for (;;) {
      skip_space();
      if (pos == body.size() || at(kFunctionOpen)) break;
      if (at(kFunctionClose)) {
        pos += kFunctionClose.size();
        break;
      }
      if (!at(kParamOpen)) return false;
      std::string param;
      if (!tag_name(kParamOpen, param)) return false;
      size_t end = body.size();
      for (std::string_view t : {kParamClose, kParamOpen, kFunctionClose})
        end = std::min(end, body.find(t, pos));
      const std::string_view raw = body.substr(pos, end - pos);
      pos = end;
      if (at(kParamClose)) pos += kParamClose.size();
      const ojson* schema = nullptr;
      if (properties.is_object())
        if (const auto s = properties.find(param); s != properties.end()) schema = &*s;
      fn.arguments[param] = typed_value(raw, schema);
    }
    functions.push_back(std::move(fn));
  }
  if (functions.empty()) return false;

  for (Parsed& fn : functions) {
    const int index = int(calls_.size());
    ToolCall call{tool_call_id(id_seed_, index), fn.name, dump(fn.arguments)};
    out.calls.push_back({index, call.id, call.name, ""});
    // The arguments in pieces whose concatenation is exactly dump(arguments): compact JSON is
    // "{" key ":" value ("," key ":" value)* "}".
    if (fn.arguments.empty()) {
      out.calls.push_back({index, "", "", "{}"});
    } else {
      bool first = true;
      for (const auto& [key, value] : fn.arguments.items()) {
        out.calls.push_back({index, "", "", (first ? "{" : ",") + dump(key) + ":" + dump(value)});
        first = false;
      }
      out.calls.push_back({index, "", "", "}"});
    }
    calls_.push_back(std::move(call));
  }
  return true;
}

}  // namespace zaya::chat
