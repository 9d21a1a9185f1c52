// The lexer: one pass over the normalized source, following jinja2's lexer rules (the data rule
// with its OptionalLStrip handling, the block/variable/comment end rules, the tag rules
// whitespace, float, integer, name, string, operator, and the bracket balancing that lets `}}`
// close a dict literal inside {{ }}).
#include "jinja/lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "jinja/jinja.h"
#include "jinja/value.h"

namespace zaya::jinja {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

struct Lexer {
  std::string src;
  const std::string& name;
  std::vector<size_t> line_starts{0};
  std::vector<Token> out;
  size_t n = 0;

  Lexer(std::string_view source, const std::string& nm) : name(nm) {
    src.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src.push_back('\n');
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src.push_back(source[i]);
      }
    }
    if (!src.empty() && src.back() == '\n') src.pop_back();
    n = src.size();
    for (size_t i = 0; i < n; ++i)
      if (src[i] == '\n') line_starts.push_back(i + 1);
  }

  void position(size_t at, int& line, int& col) const {
    const auto it = std::upper_bound(line_starts.begin(), line_starts.end(), at);
    const size_t l = size_t(it - line_starts.begin());
    line = int(l);
    col = int(at - line_starts[l - 1]) + 1;
  }

  [[noreturn]] void fail_at(size_t at, const std::string& msg) const {
    int line, col;
    position(std::min(at, n), line, col);
    throw TemplateError(name, line, col, msg);
  }

  void emit(Tok t, size_t at, std::string text = {}) {
    Token tok;
    tok.type = t;
    tok.text = std::move(text);
    position(at, tok.line, tok.col);
    out.push_back(std::move(tok));
  }

  // Python's \s at src[p] (unicode whitespace): its length in bytes, or 0.
  size_t space_len(size_t p) const {
    if (p >= n) return 0;
    const unsigned char c = static_cast<unsigned char>(src[p]);
    if (c < 0x80) return is_py_space(c) ? 1 : 0;
    size_t len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (p + len > n) return 0;
    const std::u32string cp = utf8_decode(std::string_view(src).substr(p, len));
    return cp.size() == 1 && is_py_space(cp[0]) ? len : 0;
  }
  size_t skip_space(size_t p) const {
    while (size_t l = space_len(p)) p += l;
    return p;
  }

  // Python's str.rstrip() of a piece of data.
  static std::string rstrip(std::string_view text) {
    std::u32string cp = utf8_decode(text);
    while (!cp.empty() && is_py_space(cp.back())) cp.pop_back();
    return utf8_encode(cp);
  }

  // The data before a tag, as the OptionalLStrip rule leaves it.
  std::string strip_before(std::string_view text, char sign, bool is_variable,
                           bool line_starting) const {
    if (sign == '-') return rstrip(text);
    if (sign != '+' && !is_variable) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting) && l_pos < text.size()) {
        std::u32string rest = utf8_decode(text.substr(l_pos));
        if (std::all_of(rest.begin(), rest.end(), is_py_space))
          return std::string(text.substr(0, l_pos));
      }
    }
    return std::string(text);
  }

  // "{%" [-+]? \s* WORD \s* then the end of the tag ("-%}" \s*, "+%}", "%}"); returns the position
  // after the closing "%}" (before any whitespace stripping) and the end sign, or npos.
  size_t match_word_tag(size_t t, std::string_view word, char& open_sign, char& close_sign) const {
    if (src.compare(t, 2, "{%") != 0) return std::string::npos;
    size_t p = t + 2;
    open_sign = 0;
    if (p < n && (src[p] == '-' || src[p] == '+')) open_sign = src[p++];
    p = skip_space(p);
    if (src.compare(p, word.size(), word) != 0) return std::string::npos;
    p += word.size();
    if (p < n && is_name_char(src[p])) return std::string::npos;
    p = skip_space(p);
    close_sign = 0;
    if (p < n && (src[p] == '-' || src[p] == '+')) close_sign = src[p++];
    if (src.compare(p, 2, "%}") != 0) return std::string::npos;
    return p + 2;
  }

  size_t after_end(size_t p, char sign, bool trim_newline) const {
    if (sign == '-') return skip_space(p);
    if (sign == '+') return p;
    if (trim_newline && p < n && src[p] == '\n') return p + 1;
    return p;
  }

  void run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < n) {
      size_t t = pos;
      while (true) {
        t = src.find('{', t);
        if (t == std::string::npos || t + 1 >= n) {
          t = std::string::npos;
          break;
        }
        if (src[t + 1] == '{' || src[t + 1] == '%' || src[t + 1] == '#') break;
        ++t;
      }
      if (t == std::string::npos) {
        emit(Tok::Data, pos, src.substr(pos));
        break;
      }
      const char kind = src[t + 1];
      const char sign = t + 2 < n && (src[t + 2] == '-' || src[t + 2] == '+') ? src[t + 2] : 0;
      char raw_open = 0, raw_close = 0;
      const size_t raw_end =
          kind == '%' ? match_word_tag(t, "raw", raw_open, raw_close) : std::string::npos;
      std::string text = strip_before(std::string_view(src).substr(pos, t - pos), sign, kind == '{',
                                      line_starting);
      if (!text.empty()) emit(Tok::Data, pos, std::move(text));
      if (kind == '#') {
        const size_t s0 = t + 2 + (sign ? 1 : 0);
        const size_t e = src.find("#}", s0);
        if (e == std::string::npos) fail_at(t, "Missing end of comment tag");
        const char esign = e > s0 && (src[e - 1] == '-' || src[e - 1] == '+') ? src[e - 1] : 0;
        pos = after_end(e + 2, esign, true);
        line_starting = src[pos - 1] == '\n';
        continue;
      }
      if (raw_end != std::string::npos) {
        pos = raw_close == '-' ? skip_space(raw_end) : raw_end;
        line_starting = src[pos - 1] == '\n';
        size_t e = pos;
        char eo = 0, ec = 0;
        size_t after = std::string::npos;
        while ((e = src.find("{%", e)) != std::string::npos) {
          after = match_word_tag(e, "endraw", eo, ec);
          if (after != std::string::npos) break;
          e += 2;
        }
        if (e == std::string::npos) fail_at(t, "unexpected end of template: missing endraw");
        std::string body =
            strip_before(std::string_view(src).substr(pos, e - pos), eo, false, line_starting);
        if (!body.empty()) emit(Tok::Data, pos, std::move(body));
        pos = after_end(after, ec, true);
        line_starting = src[pos - 1] == '\n';
        continue;
      }
      const bool block = kind == '%';
      emit(block ? Tok::BlockBegin : Tok::VarBegin, t);
      pos = tag(t, t + 2 + (sign ? 1 : 0), block);
      line_starting = src[pos - 1] == '\n';
    }
    emit(Tok::Eof, n);
  }

  // Tokens of one tag from p; returns the position after its end delimiter.
  size_t tag(size_t begin, size_t p, bool block) {
    std::string stack;
    while (true) {
      p = skip_space(p);
      if (p >= n)
        fail_at(begin, block ? "unexpected end of template: the tag opened here has no '%}'"
                             : "unexpected end of template: the tag opened here has no '}}'");
      if (stack.empty()) {
        if (block) {
          if (src.compare(p, 3, "-%}") == 0) {
            emit(Tok::BlockEnd, p);
            return skip_space(p + 3);
          }
          if (src.compare(p, 3, "+%}") == 0) {
            emit(Tok::BlockEnd, p);
            return p + 3;
          }
          if (src.compare(p, 2, "%}") == 0) {
            emit(Tok::BlockEnd, p);
            return after_end(p + 2, 0, true);
          }
        } else {
          if (src.compare(p, 3, "-}}") == 0) {
            emit(Tok::VarEnd, p);
            return skip_space(p + 3);
          }
          if (src.compare(p, 2, "}}") == 0) {
            emit(Tok::VarEnd, p);
            return p + 2;
          }
        }
      }
      const char c = src[p];
      if (is_digit(c)) {
        p = number(p);
      } else if (is_name_start(c)) {
        size_t e = p;
        while (e < n && is_name_char(src[e])) ++e;
        emit(Tok::Name, p, src.substr(p, e - p));
        p = e;
      } else if (c == '\'' || c == '"') {
        p = string(p);
      } else {
        p = op(p, stack);
      }
    }
  }

  size_t digits(size_t p) const {  // (\d+_)*\d+ from p (p at a digit); returns the end
    while (true) {
      while (p < n && is_digit(src[p])) ++p;
      if (p + 1 < n && src[p] == '_' && is_digit(src[p + 1])) {
        ++p;
        continue;
      }
      return p;
    }
  }

  size_t number(size_t p) {
    const size_t start = p;
    size_t e = digits(p);
    bool is_float = false;
    const bool after_dot = start > 0 && src[start - 1] == '.';
    if (!after_dot) {
      size_t f = e;
      if (f + 1 < n && src[f] == '.' && is_digit(src[f + 1])) {
        f = digits(f + 1);
        is_float = true;
      }
      size_t x = f;
      if (x < n && (src[x] == 'e' || src[x] == 'E')) {
        size_t y = x + 1;
        if (y < n && (src[y] == '+' || src[y] == '-')) ++y;
        if (y < n && is_digit(src[y])) {
          f = digits(y);
          is_float = true;
        }
      }
      if (is_float) e = f;
    }
    std::string text;
    for (size_t k = start; k < e; ++k)
      if (src[k] != '_') text += src[k];
    if (is_float) {
      emit(Tok::Float, start, text);
      out.back().fval = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      const long long v = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) fail_at(start, "integer literal too large: " + text);
      emit(Tok::Int, start, text);
      out.back().ival = v;
    }
    return e;
  }

  static int hex_value(char c) {
    if (is_digit(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // A quoted string with Python's unicode-escape rules.
  size_t string(size_t p) {
    const char q = src[p];
    size_t e = p + 1;
    std::string v;
    while (true) {
      if (e >= n) fail_at(p, "unexpected end of template: unterminated string");
      const char c = src[e];
      if (c == q) break;
      if (c != '\\') {
        v.push_back(c);
        ++e;
        continue;
      }
      if (e + 1 >= n) fail_at(p, "unexpected end of template: unterminated string");
      const char d = src[e + 1];
      e += 2;
      auto hex = [&](int count) {
        uint32_t cp = 0;
        for (int k = 0; k < count; ++k) {
          const int h = e < n ? hex_value(src[e]) : -1;
          if (h < 0) fail_at(p, "truncated \\x, \\u or \\U escape in a string");
          cp = cp * 16 + uint32_t(h);
          ++e;
        }
        if (cp > 0x10FFFF) fail_at(p, "illegal Unicode character in a string escape");
        utf8_append(v, char32_t(cp));
      };
      switch (d) {
        case '\n':
          break;
        case '\\':
        case '\'':
        case '"':
          v.push_back(d);
          break;
        case 'a':
          v.push_back('\a');
          break;
        case 'b':
          v.push_back('\b');
          break;
        case 'f':
          v.push_back('\f');
          break;
        case 'n':
          v.push_back('\n');
          break;
        case 'r':
          v.push_back('\r');
          break;
        case 't':
          v.push_back('\t');
          break;
        case 'v':
          v.push_back('\v');
          break;
        case 'x':
          hex(2);
          break;
        case 'u':
          hex(4);
          break;
        case 'U':
          hex(8);
          break;
        default:
          if (d >= '0' && d <= '7') {
            uint32_t cp = uint32_t(d - '0');
            for (int k = 0; k < 2 && e < n && src[e] >= '0' && src[e] <= '7'; ++k, ++e)
              cp = cp * 8 + uint32_t(src[e] - '0');
            utf8_append(v, char32_t(cp));
          } else {
            v.push_back('\\');
            v.push_back(d);
          }
      }
    }
    emit(Tok::String, p, std::move(v));
    return e + 1;
  }

  size_t op(size_t p, std::string& stack) {
    static const char* const two[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* o : two)
      if (src.compare(p, 2, o) == 0) {
        emit(Tok::Op, p, o);
        return p + 2;
      }
    const char c = src[p];
    static const std::string_view one = "+-/*%~[](){}><=.:|,;";
    if (one.find(c) == std::string_view::npos)
      fail_at(p, std::string("unexpected char '") + c + "'");
    if (c == '(' || c == '[' || c == '{') {
      if (stack.size() >= 256)
        fail_at(p, "the template nests too deeply (more than 256 open brackets)");
      stack.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (stack.empty()) fail_at(p, std::string("unexpected '") + c + "'");
      if (stack.back() != c)
        fail_at(p, std::string("unexpected '") + c + "', expected '" + stack.back() + "'");
      stack.pop_back();
    }
    emit(Tok::Op, p, std::string(1, c));
    return p + 1;
  }
};

}  // namespace

std::vector<Token> lex(std::string_view source, const std::string& name) {
  Lexer l(source, name);
  l.run();
  return std::move(l.out);
}

}  // namespace zaya::jinja
