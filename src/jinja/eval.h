// The evaluator: one render of a parsed program. Scopes follow jinja2's: the template's top level,
// a fresh scope for each iteration of a for loop (so a {% set %} inside a loop is gone at the next
// iteration and after the loop — namespace() is how templates carry state out), a scope per macro
// call (whose parent is the scope the macro was defined in) and per caller() call; if blocks open
// none.
//
// Contract: Evaluator::run renders the program with the context's variables and returns the text;
// every failure is a TemplateError naming the innermost expression or statement (position) that
// failed. Builtins (builtins.cpp) raise ValueError; the evaluator adds the position.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/ast.h"
#include "jinja/jinja.h"
#include "jinja/value.h"

namespace zaya::jinja {

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;
  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value v);
};
using ScopePtr = std::shared_ptr<Scope>;

// Evaluated call arguments, bound Python-style by the callee.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // The argument at position i or named `name`, else `def`.
  Value get(size_t i, std::string_view name, Value def = Value()) const;
  bool has(size_t i, std::string_view name) const;
  // Throws when there are more positional arguments than `names`, or a keyword not in it.
  void check(const std::string& fname, std::initializer_list<std::string_view> names) const;
};

class Evaluator;

struct Callable : Object {
  virtual Value call(Evaluator& ev, Args& args, const Expr& at) const = 0;
  virtual std::string describe() const = 0;
};

class Evaluator {
 public:
  Evaluator(const Program& prog, const RenderOptions& opts);
  ~Evaluator();
  std::string run(const nlohmann::ordered_json& context);

  // For the builtins.
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  Value call_value(const Value& fn, Args& args, const Expr& at);
  void step(uint64_t n = 1);
  void check_size(size_t bytes) const;  // a string or list this large is over the output limit
  const RenderOptions& options() const { return opts_; }
  std::shared_ptr<NsObj> new_namespace();
  [[noreturn]] void fail(int line, int col, const std::string& msg) const;
  const std::string& template_name() const { return prog_.name; }

  // Macro and caller calls.
  Value call_macro(const Stmt& def, const std::weak_ptr<Scope>& closure, Args& args,
                   const Value& caller, const Expr& at);
  Value call_caller(const Stmt& block, const std::weak_ptr<Scope>& scope, Args& args,
                    const Expr& at);
  // Both: `def`'s body with its parameters bound to `args`, in a scope under `parent`; `calls`,
  // `hint` and `who` name it in the depth and argument-count errors; `caller` (unless undefined)
  // is bound as caller().
  Value call_body(const Stmt& def, const std::weak_ptr<Scope>& parent, Args& args,
                  const char* calls, const char* hint, const std::string& who, const Value& caller);

 private:
  enum class Flow { Normal, Break, Continue };
  struct Nesting;

  Flow exec(const Body& body, const ScopePtr& scope);
  Flow exec_stmt(const Stmt& s, const ScopePtr& scope);
  Flow exec_for(const Stmt& s, const ScopePtr& scope);
  void exec_set(const Stmt& s, const ScopePtr& scope);
  std::string capture(const Body& body, const ScopePtr& scope);
  Value apply_filters(const std::vector<FilterCall>& filters, Value v, const ScopePtr& scope);
  void bind_targets(const Stmt& s, const Value& v, Scope& scope);
  void write(std::string_view text);

  Value eval(const Expr& e, const ScopePtr& scope);
  Value eval_inner(const Expr& e, const ScopePtr& scope);
  Value eval_binary(const Expr& e, const Value& a, const Value& b);
  Value eval_compare(const Expr& e, const ScopePtr& scope);
  Value eval_slice(const Expr& e, const ScopePtr& scope);
  Value lookup(const std::string& name, const ScopePtr& scope);
  void eval_args(const CallArgs& c, const ScopePtr& scope, Args& out);

  const Program& prog_;
  const RenderOptions& opts_;
  ScopePtr root_;
  std::string* out_ = nullptr;
  uint64_t steps_ = 0;
  int nesting_ = 0;
  int calls_ = 0;
  std::vector<std::shared_ptr<NsObj>> namespaces_;
};

// Builtins (builtins.cpp). Filters and tests are looked up by name; an unknown one is refused at
// parse time (as jinja2 does when it compiles the template).
bool is_filter(const std::string& name);
bool is_test(const std::string& name);
Value apply_filter(Evaluator& ev, const std::string& name, const Value& v, Args& args);
bool apply_test(Evaluator& ev, const std::string& name, const Value& v, Args& args);
// A method of a str, list, dict or loop object (the sandbox's safe ones), or null.
Value method_of(const Value& self, const std::string& name);
bool unsafe_method(const Value& self, const std::string& name);
// range, dict, namespace, raise_exception, strftime_now (undefined for other names).
Value global_value(const std::string& name);
// The elements `for` and the filters iterate over (list items, dict keys, string characters).
std::vector<Value> iterate(const Value& v);
// Python's str % args.
std::string percent_format(const std::string& fmt, const Value& args);

}  // namespace zaya::jinja
