// The parser: tokens to the program tree, following jinja2's grammar (parser.py) for the
// statements and expressions this engine implements. Precedence, lowest first: inline if/else,
// or, and, not, comparisons (== != < <= > >= in, not in), + -, ~, * / // %, **, unary - +,
// then primaries with postfix . [] () and | filters / is tests.
//
// Nesting (blocks, brackets, unary operators) is bounded by kMaxParseDepth, so a hostile template
// (100k '(' or nested ifs) is a TemplateError, never a stack overflow here or in the evaluator.
#include <string_view>

#include "jinja/ast.h"
#include "jinja/eval.h"
#include "jinja/jinja.h"
#include "jinja/lexer.h"

namespace zaya::jinja {

namespace {

constexpr int kMaxParseDepth = 96;

struct Parser {
  std::vector<Token> toks;
  const std::string& name;
  size_t p = 0;
  int depth = 0;
  int loop_depth = 0;

  struct Nest {
    Parser& ps;
    explicit Nest(Parser& x, const Token& at) : ps(x) {
      if (++ps.depth > kMaxParseDepth)
        throw TemplateError(ps.name, at.line, at.col,
                            "the template nests too deeply (more than " +
                                std::to_string(kMaxParseDepth) + " levels)");
    }
    ~Nest() { --ps.depth; }
  };

  const Token& cur() const { return toks[p]; }
  const Token& peek(size_t k = 1) const { return toks[std::min(p + k, toks.size() - 1)]; }
  bool is_op(const char* o) const { return cur().type == Tok::Op && cur().text == o; }
  bool is_name(const char* w) const { return cur().type == Tok::Name && cur().text == w; }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::Eof:
        return "end of template";
      case Tok::VarEnd:
        return "'}}'";
      case Tok::BlockEnd:
        return "'%}'";
      case Tok::VarBegin:
        return "'{{'";
      case Tok::BlockBegin:
        return "'{%'";
      case Tok::Data:
        return "template data";
      case Tok::String:
        return "string";
      case Tok::Int:
      case Tok::Float:
        return "number";
      default:
        return "'" + t.text + "'";
    }
  }

  [[noreturn]] void fail(const Token& t, const std::string& msg) const {
    throw TemplateError(name, t.line, t.col, msg);
  }
  [[noreturn]] void unexpected(const std::string& expected) const {
    fail(cur(),
         "unexpected " + describe(cur()) + (expected.empty() ? "" : ", expected " + expected));
  }

  void expect_op(const char* o) {
    if (!is_op(o)) unexpected(std::string("'") + o + "'");
    ++p;
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) unexpected("a name");
    return toks[p++].text;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) unexpected("'%}'");
    ++p;
  }

  ExprPtr node(ExprKind k, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = at.line;
    e->col = at.col;
    return e;
  }

  // ---- expressions ------------------------------------------------------------------------------

  bool at_tuple_end() const {
    const Token& t = cur();
    return t.type == Tok::VarEnd || t.type == Tok::BlockEnd || t.type == Tok::Eof ||
           (t.type == Tok::Op && t.text == ")") ||
           (t.type == Tok::Name && (t.text == "if" || t.text == "recursive"));
  }

  // expression [, expression …]: a tuple when there is a comma (or explicit parentheses held it).
  ExprPtr parse_tuple(bool with_condexpr = true, bool explicit_parens = false) {
    const Token& start = cur();
    std::vector<ExprPtr> items;
    bool comma = false;
    while (true) {
      if (!items.empty()) {
        if (!is_op(",")) break;
        ++p;
        comma = true;
        if (at_tuple_end()) break;
      }
      if (items.empty() && explicit_parens && is_op(")")) break;
      items.push_back(parse_expression(with_condexpr));
    }
    if (!comma && items.size() == 1) return std::move(items[0]);
    if (items.empty() && !explicit_parens) unexpected("an expression");
    auto e = node(ExprKind::List, start);
    e->tuple = true;
    e->items = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr = true) {
    Nest nest(*this, cur());
    ExprPtr e = parse_or();
    if (!with_condexpr) return e;
    while (is_name("if")) {
      const Token& at = cur();
      ++p;
      ExprPtr c = parse_or();
      ExprPtr other;
      if (is_name("else")) {
        ++p;
        other = parse_expression();
      }
      auto x = node(ExprKind::CondExpr, at);
      x->items.push_back(std::move(c));
      x->items.push_back(std::move(e));
      x->items.push_back(std::move(other));
      e = std::move(x);
    }
    return e;
  }

  ExprPtr binary(ExprKind k, const Token& at, ExprPtr a, ExprPtr b, std::string op = {}) {
    auto e = node(k, at);
    e->name = std::move(op);
    e->items.push_back(std::move(a));
    e->items.push_back(std::move(b));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      const Token& at = toks[p++];
      e = binary(ExprKind::Or, at, std::move(e), parse_and());
    }
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      const Token& at = toks[p++];
      e = binary(ExprKind::And, at, std::move(e), parse_not());
    }
    return e;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      Nest nest(*this, cur());
      const Token& at = toks[p++];
      auto e = node(ExprKind::Not, at);
      e->items.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    const Token& at = cur();
    ExprPtr first = parse_math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> rest;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::Op && (t.text == "==" || t.text == "!=" || t.text == "<" ||
                                t.text == "<=" || t.text == ">" || t.text == ">=")) {
        ++p;
        ops.push_back(t.text);
      } else if (is_name("in")) {
        ++p;
        ops.push_back("in");
      } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
        p += 2;
        ops.push_back("notin");
      } else {
        break;
      }
      rest.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    auto e = node(ExprKind::Compare, at);
    e->items.push_back(std::move(first));
    for (auto& r : rest) e->items.push_back(std::move(r));
    e->ops = std::move(ops);
    return e;
  }
  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& at = toks[p++];
      e = binary(ExprKind::Binary, at, std::move(e), parse_concat(), at.text);
    }
    return e;
  }
  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      const Token& at = toks[p++];
      e = binary(ExprKind::Binary, at, std::move(e), parse_math2(), "~");
    }
    return e;
  }
  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& at = toks[p++];
      e = binary(ExprKind::Binary, at, std::move(e), parse_pow(), at.text);
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary();
    while (is_op("**")) {
      const Token& at = toks[p++];
      e = binary(ExprKind::Binary, at, std::move(e), parse_unary(), "**");
    }
    return e;
  }
  ExprPtr parse_unary(bool with_filter = true) {
    Nest nest(*this, cur());
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token& at = toks[p++];
      e = node(at.text == "-" ? ExprKind::Neg : ExprKind::Pos, at);
      e->items.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    switch (t.type) {
      case Tok::Name: {
        ++p;
        if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
          auto e = node(ExprKind::Const, t);
          e->value = Value::boolean(t.text[0] == 't' || t.text[0] == 'T');
          return e;
        }
        if (t.text == "none" || t.text == "None") {
          auto e = node(ExprKind::Const, t);
          e->value = Value::none();
          return e;
        }
        auto e = node(ExprKind::Name, t);
        e->name = t.text;
        return e;
      }
      case Tok::String: {
        std::string s;
        while (cur().type == Tok::String) s += toks[p++].text;
        auto e = node(ExprKind::Const, t);
        e->value = Value::string(std::move(s));
        return e;
      }
      case Tok::Int: {
        ++p;
        auto e = node(ExprKind::Const, t);
        e->value = Value::integer(t.ival);
        return e;
      }
      case Tok::Float: {
        ++p;
        auto e = node(ExprKind::Const, t);
        e->value = Value::real(t.fval);
        return e;
      }
      case Tok::Op:
        if (t.text == "(") {
          ++p;
          ExprPtr e = parse_tuple(true, true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          ++p;
          auto e = node(ExprKind::List, t);
          while (!is_op("]")) {
            if (!e->items.empty()) {
              expect_op(",");
              if (is_op("]")) break;
            }
            e->items.push_back(parse_expression());
          }
          ++p;
          return e;
        }
        if (t.text == "{") {
          ++p;
          auto e = node(ExprKind::Dict, t);
          while (!is_op("}")) {
            if (!e->items.empty()) {
              expect_op(",");
              if (is_op("}")) break;
            }
            e->items.push_back(parse_expression());
            expect_op(":");
            e->items.push_back(parse_expression());
          }
          ++p;
          return e;
        }
        break;
      default:
        break;
    }
    unexpected("an expression");
  }

  void parse_call_args(CallArgs& c) {
    expect_op("(");
    while (!is_op(")")) {
      if (!c.args.empty() || !c.kwargs.empty()) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*") || is_op("**")) fail(cur(), "*args and **kwargs in calls are not supported");
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
        std::string key = toks[p].text;
        p += 2;
        c.kwargs.emplace_back(std::move(key), parse_expression());
      } else {
        if (!c.kwargs.empty()) fail(cur(), "a positional argument follows keyword arguments");
        c.args.push_back(parse_expression());
      }
    }
    ++p;
  }

  ExprPtr parse_subscript(ExprPtr e) {
    const Token& at = toks[p++];  // '.' or '['
    if (at.text == ".") {
      if (cur().type == Tok::Name) {
        auto g = node(ExprKind::Getattr, at);
        g->name = toks[p++].text;
        g->items.push_back(std::move(e));
        return g;
      }
      if (cur().type == Tok::Int) {
        auto g = node(ExprKind::Getitem, at);
        auto k = node(ExprKind::Const, cur());
        k->value = Value::integer(toks[p++].ival);
        g->items.push_back(std::move(e));
        g->items.push_back(std::move(k));
        return g;
      }
      unexpected("an attribute name");
    }
    // '[' index ']' or a slice
    std::vector<ExprPtr> parts;
    bool slice = false;
    if (!is_op(":")) parts.push_back(parse_expression());
    if (is_op(":")) {
      slice = true;
      if (parts.empty()) parts.push_back(nullptr);
      ++p;
      parts.push_back(is_op("]") || is_op(":") ? nullptr : parse_expression());
      if (is_op(":")) {
        ++p;
        parts.push_back(is_op("]") ? nullptr : parse_expression());
      } else {
        parts.push_back(nullptr);
      }
    }
    expect_op("]");
    auto g = node(slice ? ExprKind::Slice : ExprKind::Getitem, at);
    g->items.push_back(std::move(e));
    for (auto& x : parts) g->items.push_back(std::move(x));
    return g;
  }

  ExprPtr parse_call(ExprPtr e) {
    auto c = node(ExprKind::Call, cur());
    parse_call_args(c->call);
    c->items.push_back(std::move(e));
    return c;
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".") || is_op("["))
        e = parse_subscript(std::move(e));
      else if (is_op("("))
        e = parse_call(std::move(e));
      else
        return e;
    }
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (is_op(".") && peek().type == Tok::Name) {
      n += "." + peek().text;
      p += 2;
    }
    return n;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        const Token& at = toks[p++];
        auto f = node(ExprKind::Filter, cur().type == Tok::Name ? cur() : at);
        const Token& name_tok = cur();
        f->name = dotted_name();
        if (!is_filter(f->name)) fail(name_tok, "No filter named '" + f->name + "'.");
        if (is_op("(")) parse_call_args(f->call);
        f->items.push_back(std::move(e));
        e = std::move(f);
      } else if (is_name("is")) {
        ++p;
        auto t = node(ExprKind::Test, cur());
        if (is_name("not")) {
          ++p;
          t->negated = true;
        }
        t->line = cur().line;
        t->col = cur().col;
        const Token& name_tok = cur();
        t->name = dotted_name();
        if (!is_test(t->name)) fail(name_tok, "No test named '" + t->name + "'.");
        const Token& c = cur();
        if (is_op("(")) {
          parse_call_args(t->call);
        } else if ((c.type == Tok::Name || c.type == Tok::String || c.type == Tok::Int ||
                    c.type == Tok::Float || is_op("[") || is_op("{")) &&
                   !(c.type == Tok::Name &&
                     (c.text == "else" || c.text == "or" || c.text == "and"))) {
          if (is_name("is")) fail(c, "You cannot chain multiple tests with is");
          t->call.args.push_back(parse_postfix(parse_primary()));
        }
        t->items.push_back(std::move(e));
        e = std::move(t);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  // ---- statements -------------------------------------------------------------------------------

  StmtPtr stmt(StmtKind k, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->line = at.line;
    s->col = at.col;
    return s;
  }

  // Parses statements until a block tag named in `ends`; leaves p at that tag's name. At the end
  // of the template: an error naming the unclosed block `open` (or returns when `open` is null).
  Body parse_body(const std::vector<std::string_view>& ends, const Token* open,
                  const std::string& open_tag) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::Eof) {
        if (!open) return body;
        std::string expected;
        for (size_t k = 0; k < ends.size(); ++k)
          expected +=
              (k ? (k + 1 == ends.size() ? " or '" : ", '") : "'") + std::string(ends[k]) + "'";
        fail(*open, "unexpected end of template: the '" + open_tag + "' block opened here is " +
                        "not closed (expected " + expected + ")");
      }
      if (t.type == Tok::Data) {
        auto s = stmt(StmtKind::Text, t);
        s->text = t.text;
        ++p;
        body.push_back(std::move(s));
      } else if (t.type == Tok::VarBegin) {
        ++p;
        auto s = stmt(StmtKind::Print, cur());
        s->expr = parse_tuple();
        if (cur().type != Tok::VarEnd) unexpected("'}}'");
        ++p;
        body.push_back(std::move(s));
      } else if (t.type == Tok::BlockBegin) {
        ++p;
        if (cur().type != Tok::Name) unexpected("a tag name");
        for (std::string_view e : ends)
          if (cur().text == e) return body;
        body.push_back(parse_statement());
      } else {
        unexpected("");
      }
    }
  }

  // The end tag (at p) consumed with its '%}'.
  void end_tag() {
    ++p;
    expect_block_end();
  }

  void parse_targets(Stmt& s, bool allow_ns) {
    const bool paren = is_op("(");
    if (paren) ++p;
    s.targets.push_back(expect_name());
    if (allow_ns && !paren && is_op(".")) {
      ++p;
      s.ns_attr = true;
      s.text = expect_name();
      return;
    }
    while (is_op(",")) {
      ++p;
      s.target_tuple = true;
      if (paren && is_op(")")) break;
      if (!paren && (is_name("in") || is_op("="))) break;
      s.targets.push_back(expect_name());
    }
    if (paren) {
      expect_op(")");
      s.target_tuple = true;
    }
  }

  void parse_params(std::vector<std::pair<std::string, ExprPtr>>& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) {
        expect_op(",");
        if (is_op(")")) break;
      }
      std::string n = expect_name();
      ExprPtr def;
      if (is_op("=")) {
        ++p;
        def = parse_expression();
      } else {
        for (auto& [pn, pd] : params)
          if (pd) fail(cur(), "non-default argument follows default argument");
      }
      params.emplace_back(std::move(n), std::move(def));
    }
    ++p;
  }

  void parse_filter_chain(std::vector<FilterCall>& filters, bool leading_pipe) {
    bool first = true;
    while (first ? !leading_pipe || is_op("|") : is_op("|")) {
      if (!first || leading_pipe) expect_op("|");
      first = false;
      FilterCall f;
      f.line = cur().line;
      f.col = cur().col;
      const Token& name_tok = cur();
      f.name = dotted_name();
      if (!is_filter(f.name)) fail(name_tok, "No filter named '" + f.name + "'.");
      if (is_op("(")) parse_call_args(f.call);
      filters.push_back(std::move(f));
    }
  }

  StmtPtr parse_statement() {
    const Token& t = cur();
    Nest nest(*this, t);
    const std::string& tag = t.text;
    ++p;
    if (tag == "if") {
      auto s = stmt(StmtKind::If, t);
      s->conds.push_back(parse_tuple(false));
      expect_block_end();
      while (true) {
        s->bodies.push_back(parse_body({"elif", "else", "endif"}, &t, "if"));
        const std::string which = cur().text;
        ++p;
        if (which == "elif") {
          s->conds.push_back(parse_tuple(false));
          expect_block_end();
        } else if (which == "else") {
          expect_block_end();
          s->bodies.push_back(parse_body({"endif"}, &t, "if"));
          end_tag();
          break;
        } else {
          expect_block_end();
          break;
        }
      }
      return s;
    }
    if (tag == "for") {
      auto s = stmt(StmtKind::For, t);
      parse_targets(*s, false);
      if (!is_name("in")) unexpected("'in'");
      ++p;
      s->expr = parse_tuple(false);
      if (is_name("if")) {
        ++p;
        s->cond = parse_expression();
      }
      if (is_name("recursive")) fail(cur(), "recursive loops are not supported");
      expect_block_end();
      ++loop_depth;
      s->bodies.push_back(parse_body({"endfor", "else"}, &t, "for"));
      --loop_depth;
      if (cur().text == "else") {
        end_tag();
        s->bodies.push_back(parse_body({"endfor"}, &t, "for"));
      }
      end_tag();
      return s;
    }
    if (tag == "set") {
      auto s = stmt(StmtKind::Set, t);
      parse_targets(*s, true);
      if (is_op("=")) {
        ++p;
        s->expr = parse_tuple();
        expect_block_end();
        return s;
      }
      if (s->target_tuple || s->ns_attr) unexpected("'='");
      s->kind = StmtKind::SetBlock;
      parse_filter_chain(s->filters, true);
      expect_block_end();
      s->bodies.push_back(parse_body({"endset"}, &t, "set"));
      end_tag();
      return s;
    }
    if (tag == "macro") {
      auto s = stmt(StmtKind::Macro, t);
      s->text = expect_name();
      parse_params(s->params);
      expect_block_end();
      const int saved = loop_depth;
      loop_depth = 0;
      s->bodies.push_back(parse_body({"endmacro"}, &t, "macro"));
      loop_depth = saved;
      end_tag();
      return s;
    }
    if (tag == "call") {
      auto s = stmt(StmtKind::CallBlock, t);
      if (is_op("(")) parse_params(s->params);
      s->expr = parse_expression();
      if (s->expr->kind != ExprKind::Call) fail(t, "expected a call after 'call'");
      expect_block_end();
      const int saved = loop_depth;
      loop_depth = 0;
      s->bodies.push_back(parse_body({"endcall"}, &t, "call"));
      loop_depth = saved;
      end_tag();
      return s;
    }
    if (tag == "filter") {
      auto s = stmt(StmtKind::FilterBlock, t);
      parse_filter_chain(s->filters, false);
      expect_block_end();
      s->bodies.push_back(parse_body({"endfilter"}, &t, "filter"));
      end_tag();
      return s;
    }
    if (tag == "with") {
      auto s = stmt(StmtKind::With, t);
      while (cur().type != Tok::BlockEnd) {
        if (!s->targets.empty()) expect_op(",");
        s->targets.push_back(expect_name());
        expect_op("=");
        s->conds.push_back(parse_expression());
      }
      expect_block_end();
      s->bodies.push_back(parse_body({"endwith"}, &t, "with"));
      end_tag();
      return s;
    }
    if (tag == "generation") {
      auto s = stmt(StmtKind::Scope, t);
      expect_block_end();
      s->bodies.push_back(parse_body({"endgeneration"}, &t, "generation"));
      end_tag();
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth == 0) fail(t, "'" + tag + "' outside of a for loop");
      auto s = stmt(tag == "break" ? StmtKind::Break : StmtKind::Continue, t);
      expect_block_end();
      return s;
    }
    static const char* const unsupported[] = {"include", "import", "from",  "extends",
                                              "block",   "do",     "trans", "autoescape"};
    for (const char* u : unsupported)
      if (tag == u) fail(t, "the '" + tag + "' tag is not supported (docs/chat-templates.md)");
    if (tag.rfind("end", 0) == 0 || tag == "else" || tag == "elif")
      fail(t, "unexpected '" + tag + "': no block that it closes is open here");
    fail(t, "unknown tag '" + tag + "'");
  }
};

}  // namespace

std::shared_ptr<const Program> parse_program(std::string_view source, const std::string& name) {
  Parser ps{lex(source, name), name};
  auto prog = std::make_shared<Program>();
  prog->name = name;
  prog->body = ps.parse_body({}, nullptr, "");
  if (ps.cur().type != Tok::Eof)  // an end tag with nothing open
    ps.fail(ps.cur(), "unexpected '" + ps.cur().text + "': no block is open");
  return prog;
}

}  // namespace zaya::jinja
