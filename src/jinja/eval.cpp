// The evaluator: statements, expressions, scopes, limits (operators.cpp: the operators).
#include "jinja/eval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

namespace zaya::jinja {

namespace {

// Nested evaluation frames (statements, expressions, calls) one render may hold. Expression and
// block nesting is bounded by the parser; this bounds what macro recursion stacks on top of it,
// well inside a default 8 MiB stack even under the sanitizers.
constexpr int kMaxNesting = 3000;

std::string object_type_repr(const Value& v) {
  if (v.kind == Kind::None) return "None";
  return type_name(v) + " object";
}

[[noreturn]] void fail_undefined(const Value& v) {
  throw ValueError(v.str().empty() ? "'undefined' is undefined" : v.str());
}

struct MacroFn : Callable {
  const Stmt* def;
  std::weak_ptr<Scope> closure;
  MacroFn(const Stmt* d, std::weak_ptr<Scope> c) : def(d), closure(std::move(c)) {}
  Value call(Evaluator& ev, Args& args, const Expr& at) const override {
    return ev.call_macro(*def, closure, args, Value(), at);
  }
  std::string describe() const override { return "<Macro '" + def->text + "'>"; }
};

struct CallerFn : Callable {
  const Stmt* block;
  std::weak_ptr<Scope> scope;
  CallerFn(const Stmt* b, std::weak_ptr<Scope> s) : block(b), scope(std::move(s)) {}
  Value call(Evaluator& ev, Args& args, const Expr& at) const override {
    return ev.call_caller(*block, scope, args, at);
  }
  std::string describe() const override { return "<Macro 'caller'>"; }
};

}  // namespace

// ---- scopes and arguments ----------------------------------------------------------------------

const Value* Scope::find(std::string_view name) const {
  for (const Scope* s = this; s; s = s->parent.get())
    for (const auto& [k, v] : s->vars)
      if (k == name) return &v;
  return nullptr;
}

void Scope::set(const std::string& name, Value v) {
  for (auto& [k, x] : vars)
    if (k == name) {
      x = std::move(v);
      return;
    }
  vars.emplace_back(name, std::move(v));
}

Value Args::get(size_t i, std::string_view name, Value def) const {
  if (i < pos.size()) return pos[i];
  for (const auto& [k, v] : kw)
    if (k == name) return v;
  return def;
}

bool Args::has(size_t i, std::string_view name) const {
  if (i < pos.size()) return true;
  for (const auto& [k, v] : kw)
    if (k == name) return true;
  return false;
}

void Args::check(const std::string& fname, std::initializer_list<std::string_view> names) const {
  if (pos.size() > names.size())
    throw ValueError(fname + "() takes at most " + std::to_string(names.size()) +
                     " argument(s), got " + std::to_string(pos.size()));
  for (const auto& [k, v] : kw) {
    bool known = false;
    size_t idx = 0;
    for (std::string_view n : names) {
      if (n == k) {
        known = true;
        if (idx < pos.size())
          throw ValueError(fname + "() got multiple values for argument '" + k + "'");
      }
      ++idx;
    }
    if (!known) throw ValueError(fname + "() got an unexpected keyword argument '" + k + "'");
  }
}

// ---- the evaluator -----------------------------------------------------------------------------

struct Evaluator::Nesting {
  Evaluator& ev;
  explicit Nesting(Evaluator& e) : ev(e) {
    if (++ev.nesting_ > kMaxNesting) {
      --ev.nesting_;
      throw ValueError("the template nests or recurses too deeply");
    }
  }
  ~Nesting() { --ev.nesting_; }
};

Evaluator::Evaluator(const Program& prog, const RenderOptions& opts) : prog_(prog), opts_(opts) {}

Evaluator::~Evaluator() {
  // Namespaces can hold themselves (ns.x = [ns]); emptying them breaks every such cycle.
  for (auto& ns : namespaces_) {
    auto attrs = std::move(ns->attrs);
    ns->attrs.clear();
  }
}

std::shared_ptr<NsObj> Evaluator::new_namespace() {
  auto ns = std::make_shared<NsObj>();
  namespaces_.push_back(ns);
  return ns;
}

void Evaluator::fail(int line, int col, const std::string& msg) const {
  throw TemplateError(prog_.name, line, col, msg);
}

void Evaluator::step(uint64_t n) {
  steps_ += n;
  if (steps_ > opts_.max_steps)
    throw ValueError("the template ran more than " + std::to_string(opts_.max_steps) +
                     " steps (a runaway loop?)");
}

void Evaluator::check_size(size_t bytes) const {
  if (bytes > opts_.max_output_bytes)
    throw ValueError("the template's output exceeds the limit of " +
                     std::to_string(opts_.max_output_bytes) + " bytes");
}

void Evaluator::write(std::string_view text) {
  check_size(out_->size() + text.size());
  step(text.size() / 256);
  out_->append(text);
}

std::string Evaluator::run(const nlohmann::ordered_json& context) {
  root_ = std::make_shared<Scope>();
  if (!context.is_object() && !context.is_null())
    throw TemplateError(prog_.name, 0, 0, "the render context must be a JSON object");
  try {
    if (context.is_object())
      for (const auto& [k, v] : context.items()) root_->set(k, from_json(v));
  } catch (const ValueError& e) {
    throw TemplateError(prog_.name, 0, 0, std::string("the render context: ") + e.what());
  }
  std::string out;
  out_ = &out;
  exec(prog_.body, root_);
  root_.reset();
  return out;
}

Evaluator::Flow Evaluator::exec(const Body& body, const ScopePtr& scope) {
  for (const StmtPtr& s : body) {
    const Flow f = exec_stmt(*s, scope);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

std::string Evaluator::capture(const Body& body, const ScopePtr& scope) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    exec(body, scope);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buf;
}

Value Evaluator::apply_filters(const std::vector<FilterCall>& filters, Value v,
                               const ScopePtr& scope) {
  for (const FilterCall& f : filters) {
    Args args;
    eval_args(f.call, scope, args);
    try {
      v = apply_filter(*this, f.name, v, args);
    } catch (const ValueError& e) {
      fail(f.line, f.col, e.what());
    }
  }
  return v;
}

Evaluator::Flow Evaluator::exec_stmt(const Stmt& s, const ScopePtr& scope) {
  try {
    Nesting nest(*this);
    step();
    switch (s.kind) {
      case StmtKind::Text:
        write(s.text);
        return Flow::Normal;
      case StmtKind::Print: {
        const Value v = eval(*s.expr, scope);
        if (v.kind == Kind::String)
          write(v.str());
        else
          write(to_str(v));
        return Flow::Normal;
      }
      case StmtKind::If:
        for (size_t k = 0; k < s.bodies.size(); ++k) {
          if (k < s.conds.size() && !truthy(eval(*s.conds[k], scope))) continue;
          return exec(s.bodies[k], scope);
        }
        return Flow::Normal;
      case StmtKind::For:
        return exec_for(s, scope);
      case StmtKind::Set:
        exec_set(s, scope);
        return Flow::Normal;
      case StmtKind::SetBlock: {
        auto inner = std::make_shared<Scope>();
        inner->parent = scope;
        Value v = Value::string(capture(s.bodies[0], inner));
        scope->set(s.targets[0], apply_filters(s.filters, std::move(v), scope));
        return Flow::Normal;
      }
      case StmtKind::Macro:
        scope->set(s.text, Value::callable(std::make_shared<MacroFn>(&s, scope)));
        return Flow::Normal;
      case StmtKind::CallBlock: {
        const Expr& call = *s.expr;
        const Value fn = eval(*call.items[0], scope);
        Args args;
        eval_args(call.call, scope, args);
        const Value caller = Value::callable(std::make_shared<CallerFn>(&s, scope));
        Value r;
        if (fn.kind == Kind::Callable) {
          if (const auto* m = dynamic_cast<const MacroFn*>(&fn.fn()))
            r = call_macro(*m->def, m->closure, args, caller, call);
          else
            r = fn.fn().call(*this, args, call);
        } else {
          r = call_value(fn, args, call);
        }
        write(to_str(r));
        return Flow::Normal;
      }
      case StmtKind::FilterBlock: {
        Value v = Value::string(capture(s.bodies[0], scope));
        write(to_str(apply_filters(s.filters, std::move(v), scope)));
        return Flow::Normal;
      }
      case StmtKind::With: {
        auto inner = std::make_shared<Scope>();
        inner->parent = scope;
        for (size_t k = 0; k < s.targets.size(); ++k)
          inner->set(s.targets[k], eval(*s.conds[k], scope));
        return exec(s.bodies[0], inner);
      }
      case StmtKind::Scope:
        return exec(s.bodies[0], scope);
      case StmtKind::Break:
        return Flow::Break;
      case StmtKind::Continue:
        return Flow::Continue;
    }
  } catch (const ValueError& e) {
    fail(s.line, s.col, e.what());
  }
  return Flow::Normal;
}

void Evaluator::bind_targets(const Stmt& s, const Value& v, Scope& scope) {
  if (!s.target_tuple) {
    scope.set(s.targets[0], v);
    return;
  }
  const std::vector<Value> parts = iterate(v);
  if (parts.size() != s.targets.size())
    throw ValueError(
        parts.size() > s.targets.size()
            ? "too many values to unpack (expected " + std::to_string(s.targets.size()) + ")"
            : "not enough values to unpack (expected " + std::to_string(s.targets.size()) +
                  ", got " + std::to_string(parts.size()) + ")");
  for (size_t k = 0; k < parts.size(); ++k) scope.set(s.targets[k], parts[k]);
}

Evaluator::Flow Evaluator::exec_for(const Stmt& s, const ScopePtr& scope) {
  const Value seq_value = eval(*s.expr, scope);
  std::vector<Value> all = iterate(seq_value);
  auto seq = std::make_shared<ListObj>();
  if (s.cond) {
    for (Value& x : all) {
      step();
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      bind_targets(s, x, *inner);
      if (truthy(eval(*s.cond, inner))) seq->items.push_back(std::move(x));
    }
  } else {
    seq->items = std::move(all);
  }
  // jinja2 clears its "run the else block" flag at the end of the loop body, so the else block
  // also runs when every iteration ended in continue (or the first one in break).
  bool run_else = true;
  for (size_t k = 0; k < seq->items.size(); ++k) {
    step();
    auto inner = std::make_shared<Scope>();
    inner->parent = scope;
    bind_targets(s, seq->items[k], *inner);
    auto loop = std::make_shared<LoopObj>();
    loop->seq = seq;
    loop->index0 = k;
    Value lv;
    lv.kind = Kind::Loop;
    lv.obj = std::move(loop);
    inner->set("loop", std::move(lv));
    const Flow f = exec(s.bodies[0], inner);
    if (f == Flow::Normal) run_else = false;
    if (f == Flow::Break) break;
  }
  if (run_else && s.bodies.size() > 1) return exec(s.bodies[1], scope);
  return Flow::Normal;
}

void Evaluator::exec_set(const Stmt& s, const ScopePtr& scope) {
  Value v = eval(*s.expr, scope);
  if (s.ns_attr) {
    const Value target = lookup(s.targets[0], scope);
    if (target.kind != Kind::Namespace)
      throw ValueError("cannot assign attribute on non-namespace object");
    target.ns().set(s.text, std::move(v));
    return;
  }
  bind_targets(s, v, *scope);
}

Value Evaluator::call_macro(const Stmt& def, const std::weak_ptr<Scope>& closure, Args& args,
                            const Value& caller, const Expr&) {
  for (const auto& [k, v] : args.kw) {
    bool known = false;
    for (const auto& [pn, pd] : def.params) known = known || pn == k;
    if (!known) throw ValueError("macro '" + def.text + "' takes no keyword argument '" + k + "'");
  }
  return call_body(def, closure, args, "macro calls", " (runaway recursion?)",
                   "macro '" + def.text + "'", caller);
}

Value Evaluator::call_caller(const Stmt& block, const std::weak_ptr<Scope>& site, Args& args,
                             const Expr&) {
  return call_body(block, site, args, "caller() calls", "", "caller", Value());
}

Value Evaluator::call_body(const Stmt& def, const std::weak_ptr<Scope>& parent, Args& args,
                           const char* calls, const char* hint, const std::string& who,
                           const Value& caller) {
  if (++calls_ > opts_.max_depth) {
    --calls_;
    throw ValueError(std::string(calls) + " nested deeper than " + std::to_string(opts_.max_depth) +
                     hint);
  }
  struct Dec {
    int& c;
    ~Dec() { --c; }
  } dec{calls_};
  auto scope = std::make_shared<Scope>();
  scope->parent = parent.lock();
  if (!scope->parent) scope->parent = root_;
  const auto& params = def.params;
  if (args.pos.size() > params.size())
    throw ValueError(who + " takes not more than " + std::to_string(params.size()) +
                     " argument(s)");
  for (size_t k = 0; k < params.size(); ++k) {
    const auto& [pn, pd] = params[k];
    if (args.has(k, pn))
      scope->set(pn, args.get(k, pn));
    else if (pd)
      scope->set(pn, eval(*pd, scope));
    else
      scope->set(pn, Value::undefined("parameter '" + pn + "' was not provided"));
  }
  if (caller.kind != Kind::Undefined) scope->set("caller", caller);
  return Value::string(capture(def.bodies[0], scope));
}

// ---- expressions -------------------------------------------------------------------------------

Value Evaluator::lookup(const std::string& name, const ScopePtr& scope) {
  if (const Value* v = scope->find(name)) return *v;
  Value g = global_value(name);
  if (g.kind != Kind::Undefined) return g;
  return Value::undefined("'" + name + "' is undefined");
}

void Evaluator::eval_args(const CallArgs& c, const ScopePtr& scope, Args& out) {
  for (const ExprPtr& a : c.args) out.pos.push_back(eval(*a, scope));
  for (const auto& [k, a] : c.kwargs) out.kw.emplace_back(k, eval(*a, scope));
}

Value Evaluator::eval(const Expr& e, const ScopePtr& scope) {
  try {
    Nesting nest(*this);
    step();
    return eval_inner(e, scope);
  } catch (const ValueError& err) {
    fail(e.line, e.col, err.what());
  }
}

Value Evaluator::getattr(const Value& obj, const std::string& name) {
  if (obj.kind == Kind::Undefined) {
    check_safe(obj);
    fail_undefined(obj);
  }
  const bool dunder =
      name.size() > 4 && name.rfind("__", 0) == 0 && name.compare(name.size() - 2, 2, "__") == 0;
  if (dunder || unsafe_method(obj, name))
    return Value::undefined("access to attribute '" + name + "' of '" + type_name(obj) +
                            "' object is unsafe.");
  Value m = method_of(obj, name);
  if (m.kind != Kind::Undefined) return m;
  switch (obj.kind) {
    case Kind::Dict:
      if (const Value* v = obj.dict_obj().find(std::string_view(name))) return *v;
      break;
    case Kind::Namespace:
      if (const Value* v = obj.ns().find(name)) return *v;
      break;
    case Kind::Loop: {
      const LoopObj& l = obj.loop();
      const size_t n = l.seq->items.size(), i = l.index0;
      if (name == "index") return Value::integer(int64_t(i + 1));
      if (name == "index0") return Value::integer(int64_t(i));
      if (name == "revindex") return Value::integer(int64_t(n - i));
      if (name == "revindex0") return Value::integer(int64_t(n - i - 1));
      if (name == "first") return Value::boolean(i == 0);
      if (name == "last") return Value::boolean(i + 1 == n);
      if (name == "length") return Value::integer(int64_t(n));
      if (name == "depth") return Value::integer(1);
      if (name == "depth0") return Value::integer(0);
      if (name == "previtem")
        return i > 0 ? l.seq->items[i - 1] : Value::undefined("there is no previous item");
      if (name == "nextitem")
        return i + 1 < n ? l.seq->items[i + 1] : Value::undefined("there is no next item");
      break;
    }
    default:
      break;
  }
  return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + name + "'");
}

Value Evaluator::getitem(const Value& obj, const Value& key) {
  if (obj.kind == Kind::Undefined) {
    check_safe(obj);
    fail_undefined(obj);
  }
  check_safe(key);
  const bool int_key = key.kind == Kind::Int || key.kind == Kind::Bool;
  if (obj.kind == Kind::List && int_key) {
    const auto& items = obj.items();
    int64_t i = key.as_int();
    if (i < 0) i += int64_t(items.size());
    if (i >= 0 && i < int64_t(items.size())) return items[size_t(i)];
  } else if (obj.kind == Kind::String && int_key) {
    const std::string& s = obj.str();
    int64_t i = key.as_int();
    if (is_ascii(s)) {
      if (i < 0) i += int64_t(s.size());
      if (i >= 0 && i < int64_t(s.size())) return Value::string(std::string(1, s[size_t(i)]));
    } else {
      const std::u32string cp = utf8_decode(s);
      if (i < 0) i += int64_t(cp.size());
      if (i >= 0 && i < int64_t(cp.size())) {
        std::string one;
        utf8_append(one, cp[size_t(i)]);
        return Value::string(std::move(one));
      }
    }
  } else if (obj.kind == Kind::Dict) {
    if (const Value* v = obj.dict_obj().find(key)) return *v;
  }
  if (key.kind == Kind::String && obj.kind != Kind::Dict) return getattr(obj, key.str());
  if (key.kind == Kind::String) {  // a dict: its methods, as getattr after the failed lookup
    Value m = method_of(obj, key.str());
    if (m.kind != Kind::Undefined) return m;
    if (unsafe_method(obj, key.str()))
      return Value::undefined("access to attribute '" + key.str() +
                              "' of 'dict' object is unsafe.");
  }
  return Value::undefined("'" + object_type_repr(obj) + "' has no attribute " + repr(key));
}

Value Evaluator::call_value(const Value& fn, Args& args, const Expr& at) {
  if (fn.kind == Kind::Callable) return fn.fn().call(*this, args, at);
  if (fn.kind == Kind::Undefined) {
    check_safe(fn);
    fail_undefined(fn);
  }
  throw ValueError("'" + type_name(fn) + "' object is not callable");
}

Value Evaluator::eval_inner(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case ExprKind::Const:
      return e.value;
    case ExprKind::Name:
      return lookup(e.name, scope);
    case ExprKind::List: {
      std::vector<Value> items;
      items.reserve(e.items.size());
      for (const ExprPtr& x : e.items) items.push_back(eval(*x, scope));
      return Value::list(std::move(items), e.tuple);
    }
    case ExprKind::Dict: {
      std::vector<std::pair<Value, Value>> items;
      for (size_t k = 0; k + 1 < e.items.size(); k += 2) {
        Value key = eval(*e.items[k], scope);
        Value val = eval(*e.items[k + 1], scope);
        check_safe(key);
        if (key.kind == Kind::List && !key.tuple) throw ValueError("unhashable type: 'list'");
        if (key.kind == Kind::Dict) throw ValueError("unhashable type: 'dict'");
        bool replaced = false;
        for (auto& [k2, v2] : items)
          if (equals(k2, key)) {
            v2 = val;
            replaced = true;
          }
        if (!replaced) items.emplace_back(std::move(key), std::move(val));
      }
      return Value::dict(std::move(items));
    }
    case ExprKind::Getattr:
      return getattr(eval(*e.items[0], scope), e.name);
    case ExprKind::Getitem: {
      const Value obj = eval(*e.items[0], scope);
      return getitem(obj, eval(*e.items[1], scope));
    }
    case ExprKind::Slice:
      return eval_slice(e, scope);
    case ExprKind::Call: {
      const Value fn = eval(*e.items[0], scope);
      Args args;
      eval_args(e.call, scope, args);
      return call_value(fn, args, e);
    }
    case ExprKind::Filter: {
      const Value v = eval(*e.items[0], scope);
      Args args;
      eval_args(e.call, scope, args);
      return apply_filter(*this, e.name, v, args);
    }
    case ExprKind::Test: {
      const Value v = eval(*e.items[0], scope);
      Args args;
      eval_args(e.call, scope, args);
      const bool r = apply_test(*this, e.name, v, args);
      return Value::boolean(e.negated ? !r : r);
    }
    case ExprKind::Neg:
    case ExprKind::Pos: {
      const Value v = eval(*e.items[0], scope);
      check_safe(v);
      if (v.kind == Kind::Undefined) fail_undefined(v);
      if (!v.is_number())
        throw ValueError(std::string("bad operand type for unary ") +
                         (e.kind == ExprKind::Neg ? "-" : "+") + ": '" + type_name(v) + "'");
      if (e.kind == ExprKind::Pos) return v.kind == Kind::Bool ? Value::integer(v.as_int()) : v;
      if (v.kind == Kind::Float) return Value::real(-v.f);
      if (v.as_int() == std::numeric_limits<int64_t>::min())
        throw ValueError("integer overflow (the engine's integers are 64-bit)");
      return Value::integer(-v.as_int());
    }
    case ExprKind::Not:
      return Value::boolean(!truthy(eval(*e.items[0], scope)));
    case ExprKind::Binary: {
      const Value a = eval(*e.items[0], scope);
      const Value b = eval(*e.items[1], scope);
      return eval_binary(e, a, b);
    }
    case ExprKind::And: {
      Value a = eval(*e.items[0], scope);
      if (!truthy(a)) return a;
      return eval(*e.items[1], scope);
    }
    case ExprKind::Or: {
      Value a = eval(*e.items[0], scope);
      if (truthy(a)) return a;
      return eval(*e.items[1], scope);
    }
    case ExprKind::Compare:
      return eval_compare(e, scope);
    case ExprKind::CondExpr:
      if (truthy(eval(*e.items[0], scope))) return eval(*e.items[1], scope);
      if (e.items[2]) return eval(*e.items[2], scope);
      return Value::undefined(
          "the inline if expression evaluated to false and no else section "
          "was defined.");
  }
  return Value();
}

}  // namespace zaya::jinja
