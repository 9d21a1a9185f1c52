// The parsed template: expression and statement nodes, each with the line and column of the
// token it starts at (for error messages). Built once by the parser, then only read.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace zaya::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// A filter or test application: name(args, kwargs).
struct CallArgs {
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

enum class ExprKind : uint8_t {
  Const,     // value
  Name,      // name
  List,      // items (tuple flag on `tuple`)
  Dict,      // items as key, value, key, value …
  Getattr,   // items[0] . name
  Getitem,   // items[0] [ items[1] ]
  Slice,     // items[0] [ items[1] : items[2] : items[3] ] (null parts absent)
  Call,      // items[0] ( call )
  Filter,    // items[0] | name ( call )
  Test,      // items[0] is [not] name ( call )
  Neg,       // - items[0]
  Pos,       // + items[0]
  Not,       // not items[0]
  Binary,    // items[0] op items[1]: + - * / // % ** ~
  And,       // items[0] and items[1]
  Or,        // items[0] or items[1]
  Compare,   // items[0] ops[0] items[1] ops[1] items[2] …
  CondExpr,  // items[1] if items[0] else items[2] (items[2] null: undefined)
};

struct Expr {
  ExprKind kind;
  int line = 0, col = 0;
  Value value;
  std::string name;  // Name, Getattr, Filter, Test; the operator of Binary
  bool tuple = false, negated = false;
  std::vector<ExprPtr> items;
  std::vector<std::string> ops;  // Compare: "==", "!=", "<", "<=", ">", ">=", "in", "notin"
  CallArgs call;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind : uint8_t {
  Text,         // text
  Print,        // {{ expr }}
  If,           // conds[k] → bodies[k]; a trailing body without cond is the else
  For,          // for targets in expr [if cond]: bodies[0] [else bodies[1]]
  Set,          // set targets (or ns_name.attr) = expr
  SetBlock,     // set targets[0] [| filters]: bodies[0]
  Macro,        // macro name(params): bodies[0]
  CallBlock,    // call[(params)] expr: bodies[0] is caller's body
  FilterBlock,  // filter filters: bodies[0]
  With,         // with targets = conds (values): bodies[0]
  Scope,        // bodies[0] run as-is (the {% generation %} block)
  Break,
  Continue,
};

struct FilterCall {
  std::string name;
  CallArgs call;
  int line = 0, col = 0;
};

struct Stmt {
  StmtKind kind;
  int line = 0, col = 0;
  std::string text;            // Text; Set: the attribute of ns_name.attr; Macro: the name
  ExprPtr expr;                // Print / For iterable / Set value / CallBlock call
  ExprPtr cond;                // For: the `if` filter
  std::vector<ExprPtr> conds;  // If: the conditions; With: the values
  std::vector<Body> bodies;
  std::vector<std::string> targets;  // For / Set / SetBlock / With names; Set ns: {ns_name}
  bool target_tuple = false;         // For / Set: unpack the value
  bool ns_attr = false;              // Set: targets[0].text = value
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro / CallBlock (default or null)
  std::vector<FilterCall> filters;                      // FilterBlock / SetBlock
};

struct Program {
  std::string name;
  Body body;
};

std::shared_ptr<const Program> parse_program(std::string_view source, const std::string& name);

}  // namespace zaya::jinja
