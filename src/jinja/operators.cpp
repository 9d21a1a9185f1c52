// The evaluator's operators with Python's semantics: arithmetic (64-bit integers, overflow is an
// error rather than a silent wrap), string and list concatenation and repetition (bounded by the
// output limit), comparison chains, `in`, and slicing by code point.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "jinja/eval.h"

namespace zaya::jinja {

namespace {

[[noreturn]] void fail_undefined(const Value& v) {
  throw ValueError(v.str().empty() ? "'undefined' is undefined" : v.str());
}

std::string object_type_repr(const Value& v) {
  if (v.kind == Kind::None) return "None";
  return type_name(v) + " object";
}

}  // namespace

Value Evaluator::eval_slice(const Expr& e, const ScopePtr& scope) {
  const Value obj = eval(*e.items[0], scope);
  Value part[3];
  for (int k = 0; k < 3; ++k)
    if (e.items[size_t(k) + 1]) part[k] = eval(*e.items[size_t(k) + 1], scope);
  if (obj.kind == Kind::Undefined) {
    check_safe(obj);
    fail_undefined(obj);
  }
  auto as_index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.kind == Kind::Undefined || v.kind == Kind::None) return std::nullopt;
    if (v.kind != Kind::Int && v.kind != Kind::Bool)
      throw ValueError(std::string("slice ") + what + " must be an integer or None");
    return v.as_int();
  };
  const auto start = as_index(part[0], "indices"), stop = as_index(part[1], "indices");
  const int64_t stepv = as_index(part[2], "step").value_or(1);
  if (stepv == 0) throw ValueError("slice step cannot be zero");
  auto select = [&](int64_t n, auto&& emit) {
    auto clamp = [&](std::optional<int64_t> v, int64_t def) {
      if (!v) return def;
      int64_t x = *v;
      if (x < 0) x += n;
      if (stepv > 0) return std::clamp<int64_t>(x, 0, n);
      return std::clamp<int64_t>(x, -1, n - 1);
    };
    if (stepv > 0) {
      const int64_t b = clamp(start, 0), en = clamp(stop, n);
      for (int64_t i = b; i < en; i += stepv) emit(size_t(i));
    } else {
      const int64_t b = clamp(start, n - 1), en = clamp(stop, -1);
      for (int64_t i = b; i > en; i += stepv) emit(size_t(i));
    }
  };
  if (obj.kind == Kind::List) {
    const auto& items = obj.items();
    std::vector<Value> out;
    select(int64_t(items.size()), [&](size_t i) { out.push_back(items[i]); });
    return Value::list(std::move(out), obj.tuple);
  }
  if (obj.kind == Kind::String) {
    const std::u32string cp = utf8_decode(obj.str());
    std::string out;
    select(int64_t(cp.size()), [&](size_t i) { utf8_append(out, cp[i]); });
    return Value::string(std::move(out));
  }
  return Value::undefined("'" + object_type_repr(obj) + "' cannot be sliced");
}

Value Evaluator::eval_compare(const Expr& e, const ScopePtr& scope) {
  Value left = eval(*e.items[0], scope);
  for (size_t k = 0; k < e.ops.size(); ++k) {
    Value right = eval(*e.items[k + 1], scope);
    check_safe(left);
    check_safe(right);
    const std::string& op = e.ops[k];
    bool r;
    if (op == "==") {
      r = equals(left, right);
    } else if (op == "!=") {
      r = !equals(left, right);
    } else if (op == "in" || op == "notin") {
      bool found = false;
      if (right.kind == Kind::String) {
        if (left.kind != Kind::String)
          throw ValueError("'in <string>' requires string as left operand, not " + type_name(left));
        found = right.str().find(left.str()) != std::string::npos;
      } else if (right.kind == Kind::Dict) {
        found = right.dict_obj().find(left) != nullptr;
      } else if (right.kind == Kind::List) {
        for (const Value& x : right.items())
          if (equals(x, left)) {
            found = true;
            break;
          }
      } else if (right.kind == Kind::Undefined) {
        found = false;
      } else {
        throw ValueError("argument of type '" + type_name(right) + "' is not iterable");
      }
      r = op == "in" ? found : !found;
    } else {
      if (left.kind == Kind::Undefined) fail_undefined(left);
      if (right.kind == Kind::Undefined) fail_undefined(right);
      const int c = compare(left, right);
      r = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    }
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

namespace {

int64_t checked(long double exact, int64_t v) {
  if (exact > (long double)std::numeric_limits<int64_t>::max() ||
      exact < (long double)std::numeric_limits<int64_t>::min())
    throw ValueError("integer overflow (the engine's integers are 64-bit)");
  return v;
}

std::string repeat(const std::string& s, int64_t n, const Evaluator& ev) {
  if (n <= 0 || s.empty()) return "";
  ev.check_size(s.size() * size_t(std::min<int64_t>(n, int64_t(1) << 40)));
  std::string out;
  out.reserve(s.size() * size_t(n));
  for (int64_t k = 0; k < n; ++k) out += s;
  return out;
}

}  // namespace

Value Evaluator::eval_binary(const Expr& e, const Value& a, const Value& b) {
  check_safe(a);
  check_safe(b);
  const std::string& op = e.name;
  if (op == "~") {
    std::string s = to_str(a);
    s += to_str(b);
    check_size(s.size());
    return Value::string(std::move(s));
  }
  if (a.kind == Kind::Undefined) fail_undefined(a);
  if (b.kind == Kind::Undefined) fail_undefined(b);
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && a.kind != Kind::Float && b.kind != Kind::Float;
  auto type_error = [&]() -> Value {
    throw ValueError("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" +
                     type_name(b) + "'");
  };
  if (op == "+") {
    if (ints) {
      const int64_t x = a.as_int(), y = b.as_int();
      return Value::integer(checked((long double)x + y, int64_t(uint64_t(x) + uint64_t(y))));
    }
    if (nums) return Value::real(a.as_double() + b.as_double());
    if (a.kind == Kind::String && b.kind == Kind::String) {
      check_size(a.str().size() + b.str().size());
      step((a.str().size() + b.str().size()) / 256);
      return Value::string(a.str() + b.str());
    }
    if (a.kind == Kind::List && b.kind == Kind::List && a.tuple == b.tuple) {
      check_size(a.items().size() + b.items().size());
      step(a.items().size() + b.items().size());
      std::vector<Value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(items), a.tuple);
    }
    return type_error();
  }
  if (op == "-") {
    if (ints) {
      const int64_t x = a.as_int(), y = b.as_int();
      return Value::integer(checked((long double)x - y, int64_t(uint64_t(x) - uint64_t(y))));
    }
    if (nums) return Value::real(a.as_double() - b.as_double());
    return type_error();
  }
  if (op == "*") {
    if (ints) {
      const int64_t x = a.as_int(), y = b.as_int();
      return Value::integer(checked((long double)x * y, int64_t(uint64_t(x) * uint64_t(y))));
    }
    if (nums) return Value::real(a.as_double() * b.as_double());
    const Value* seq = a.kind == Kind::String || a.kind == Kind::List ? &a : &b;
    const Value* n = seq == &a ? &b : &a;
    if ((seq->kind == Kind::String || seq->kind == Kind::List) &&
        (n->kind == Kind::Int || n->kind == Kind::Bool)) {
      const int64_t count = n->as_int();
      if (seq->kind == Kind::String) {
        std::string s = repeat(seq->str(), count, *this);
        step(s.size() / 256);
        return Value::string(std::move(s));
      }
      std::vector<Value> items;
      if (count > 0 && !seq->items().empty()) {
        check_size(seq->items().size() * size_t(std::min<int64_t>(count, int64_t(1) << 40)));
        step(seq->items().size() * uint64_t(count));
        for (int64_t k = 0; k < count; ++k)
          items.insert(items.end(), seq->items().begin(), seq->items().end());
      }
      return Value::list(std::move(items), seq->tuple);
    }
    return type_error();
  }
  if (op == "/") {
    if (!nums) return type_error();
    if (b.as_double() == 0) throw ValueError("division by zero");
    return Value::real(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (op == "%" && a.kind == Kind::String) {
      std::string s = percent_format(a.str(), b);
      check_size(s.size());
      return Value::string(std::move(s));
    }
    if (!nums) return type_error();
    if (ints) {
      const int64_t x = a.as_int(), y = b.as_int();
      if (y == 0)
        throw ValueError(op == "%" ? "integer modulo by zero" : "integer division by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1)
        throw ValueError("integer overflow (the engine's integers are 64-bit)");
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        --q;
        r += y;
      }
      return Value::integer(op == "//" ? q : r);
    }
    // Python's float_divmod.
    const double x = a.as_double(), y = b.as_double();
    if (y == 0) throw ValueError(op == "%" ? "float modulo" : "float floor division by zero");
    double mod = std::fmod(x, y);
    double div = (x - mod) / y;
    if (mod != 0) {
      if ((y < 0) != (mod < 0)) {
        mod += y;
        div -= 1.0;
      }
    } else {
      mod = std::copysign(0.0, y);
    }
    double floordiv = 0;
    if (div != 0) {
      floordiv = std::floor(div);
      if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
      floordiv = std::copysign(0.0, x / y);
    }
    return Value::real(op == "%" ? mod : floordiv);
  }
  if (op == "**") {
    if (!nums) return type_error();
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), exp = b.as_int(), result = 1;
      while (exp > 0) {
        step();
        if (exp & 1) result = checked((long double)result * base, result * base);
        exp >>= 1;
        if (exp) base = checked((long double)base * base, base * base);
      }
      return Value::integer(result);
    }
    if (a.as_double() == 0 && b.as_double() < 0)
      throw ValueError("0.0 cannot be raised to a negative power");
    return Value::real(std::pow(a.as_double(), b.as_double()));
  }
  return type_error();
}

}  // namespace zaya::jinja
