// Rendering of a parsed template (jinja.h): statements write to the output, expressions
// evaluate to Values with Python's and Jinja2's semantics. Every step, every byte made and
// every level of nesting counts against TemplateLimits, so a hostile template ends in a
// Status instead of a hang or an exhausted stack.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <limits>
#include <new>

#include <fmt/format.h>

#include "chat/jinja.h"

namespace bitnet::chat::jinja {

namespace {

enum class Flow { kNormal, kBreak, kContinue };

using Scope = std::vector<std::pair<std::string, Value>>;

// Evaluated call arguments: positional, then keyword.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;

  // The argument at `index` or named `name`, else `def`.
  Value get(size_t index, std::string_view name, Value def = Value::undefined()) const {
    if (index < pos.size()) return pos[index];
    for (const auto& [k, v] : kw)
      if (k == name) return v;
    return def;
  }
  // A keyword-only argument.
  Value keyword(std::string_view name) const { return get(pos.size(), name); }
};

// Python's slice indices for a sequence of n elements.
std::vector<size_t> slice_indices(int64_t n, const Value& start, const Value& stop, int64_t step) {
  const auto clamp_index = [&](const Value& v, int64_t def) -> int64_t {
    if (v.kind != Kind::kInt) return def;
    int64_t i = v.i;
    if (i < 0) i += n;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t b = clamp_index(start, step > 0 ? 0 : n - 1);
  const int64_t e = clamp_index(stop, step > 0 ? n : -1);
  std::vector<size_t> out;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out.push_back(static_cast<size_t>(i));
  return out;
}

class Renderer {
 public:
  explicit Renderer(const TemplateLimits& limits) : limits_(limits) {}

  Status run(const Program& program, const std::vector<std::pair<std::string, Value>>& vars, std::string& out) {
    Scope globals(vars.begin(), vars.end());
    globals.emplace_back("raise_exception", Value::function(Function::kRaiseException));
    globals.emplace_back("namespace", Value::function(Function::kNamespace));
    globals.emplace_back("range", Value::function(Function::kRange));
    scopes_.push_back(std::move(globals));
    scopes_.emplace_back();  // the template's own variables
    Flow flow = Flow::kNormal;
    return exec(program.body, out, flow);
  }

 private:
  Status error(int line, const std::string& what) const {
    return invalid_argument(fmt::format("chat template: line {}: {}", line, what));
  }

  // One unit of work, plus one per 64 bytes of `n_bytes` made.
  Status step(int line, size_t n_bytes = 0) {
    steps_ += 1 + n_bytes / 64;
    if (steps_ > limits_.max_steps) {
      return out_of_range(fmt::format("chat template: line {}: more than {} evaluation steps", line, limits_.max_steps));
    }
    return {};
  }

  Result<Value> make_string(int line, std::string s) {
    if (s.size() > limits_.max_output_bytes) {
      return out_of_range(fmt::format("chat template: line {}: a string of more than {} bytes", line,
                                      limits_.max_output_bytes));
    }
    BITNET_RETURN_IF_ERROR(step(line, s.size()));
    return Value::string(std::move(s));
  }

  Result<Value> make_list(int line, List items) {
    for (const Value& v : items) {
      if (v.kind == Kind::kDict && v.dict->is_namespace) return error(line, "a namespace cannot be stored in a list");
    }
    BITNET_RETURN_IF_ERROR(step(line, items.size() * 8));
    Value v = Value::of_list(std::move(items));
    if (v.depth > static_cast<uint32_t>(limits_.max_depth)) return error(line, "lists nested too deeply");
    return v;
  }

  Status write(int line, std::string& out, std::string_view s) {
    if (out.size() + s.size() > limits_.max_output_bytes) {
      return out_of_range(fmt::format("chat template: line {}: output larger than {} bytes", line, limits_.max_output_bytes));
    }
    BITNET_RETURN_IF_ERROR(step(line, s.size()));
    out.append(s);
    return {};
  }

  Value lookup(std::string_view name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope)
      for (const auto& [k, v] : *scope)
        if (k == name) return v;
    return Value::undefined();
  }

  void assign(const std::string& name, Value v) {
    for (auto& [k, old] : scopes_.back()) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    scopes_.back().emplace_back(name, std::move(v));
  }

  // ---- statements ----

  Status exec(const Body& body, std::string& out, Flow& flow) {
    for (const auto& s : body) {
      BITNET_RETURN_IF_ERROR(step(s->line));
      switch (s->kind) {
        case StmtKind::kText: BITNET_RETURN_IF_ERROR(write(s->line, out, s->text)); break;
        case StmtKind::kOutput: {
          BITNET_ASSIGN_OR_RETURN(const Value v, eval(*s->expr));
          BITNET_RETURN_IF_ERROR(write(s->line, out, to_str(v)));
          break;
        }
        case StmtKind::kIf: {
          bool taken = false;
          for (const auto& [cond, branch] : s->branches) {
            BITNET_ASSIGN_OR_RETURN(const Value c, eval(*cond));
            if (truthy(c)) {
              BITNET_RETURN_IF_ERROR(exec(branch, out, flow));
              taken = true;
              break;
            }
          }
          if (!taken) BITNET_RETURN_IF_ERROR(exec(s->body, out, flow));
          break;
        }
        case StmtKind::kFor: BITNET_RETURN_IF_ERROR(exec_for(*s, out)); break;
        case StmtKind::kSet: {
          BITNET_ASSIGN_OR_RETURN(Value v, eval(*s->expr));
          BITNET_RETURN_IF_ERROR(set(*s, std::move(v)));
          break;
        }
        case StmtKind::kSetBlock: {
          std::string captured;
          Flow inner = Flow::kNormal;
          BITNET_RETURN_IF_ERROR(exec(s->body, captured, inner));
          BITNET_ASSIGN_OR_RETURN(Value v, make_string(s->line, std::move(captured)));
          BITNET_RETURN_IF_ERROR(set(*s, std::move(v)));
          break;
        }
        case StmtKind::kBreak: flow = Flow::kBreak; return {};
        case StmtKind::kContinue: flow = Flow::kContinue; return {};
        case StmtKind::kBlock: BITNET_RETURN_IF_ERROR(exec(s->body, out, flow)); break;
      }
      if (flow != Flow::kNormal) return {};
    }
    return {};
  }

  Status set(const Stmt& s, Value v) {
    if (s.targets.size() == 1) {
      assign(s.targets[0], std::move(v));
      return {};
    }
    const Value ns = lookup(s.targets[0]);
    if (ns.kind != Kind::kDict || !ns.dict->is_namespace) {
      return error(s.line, fmt::format("'{}' is not a namespace: cannot set '{}'", s.targets[0], s.targets[1]));
    }
    if (v.kind == Kind::kDict && v.dict->is_namespace) return error(s.line, "a namespace cannot hold a namespace");
    ns.dict->set(s.targets[1], std::move(v));
    return {};
  }

  Result<List> iterate(int line, const Value& v) {
    switch (v.kind) {
      case Kind::kUndefined: return List{};
      case Kind::kList: return *v.list;
      case Kind::kDict: {
        if (v.dict->is_namespace) break;
        List keys;
        for (const auto& item : v.dict->items) keys.push_back(Value::string(item.first));
        return keys;
      }
      case Kind::kString: {
        List chars;
        for (std::string_view c : utf8_chars(v.str())) chars.push_back(Value::string(std::string(c)));
        BITNET_RETURN_IF_ERROR(step(line, chars.size() * 8));
        return chars;
      }
      default: break;
    }
    return error(line, fmt::format("'{}' object is not iterable", kind_name(v.kind)));
  }

  Status bind_targets(const Stmt& s, const Value& item) {
    if (s.targets.size() == 1) {
      assign(s.targets[0], item);
      return {};
    }
    if (item.kind != Kind::kList || item.list->size() != 2) {
      return error(s.line, "cannot unpack a loop item into two names (it is not a pair)");
    }
    assign(s.targets[0], (*item.list)[0]);
    assign(s.targets[1], (*item.list)[1]);
    return {};
  }

  Status exec_for(const Stmt& s, std::string& out) {
    BITNET_ASSIGN_OR_RETURN(const Value seq, eval(*s.expr));
    BITNET_ASSIGN_OR_RETURN(List items, iterate(s.line, seq));
    if (s.filter) {
      List kept;
      for (Value& item : items) {
        scopes_.emplace_back();
        Status st = bind_targets(s, item);
        Result<Value> keep = st.ok() ? eval(*s.filter) : Result<Value>(st);
        scopes_.pop_back();
        if (!keep.ok()) return keep.status();
        if (truthy(*keep)) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < n; ++k) {
      BITNET_RETURN_IF_ERROR(step(s.line));
      auto loop = std::make_shared<Dict>();
      loop->items = {
          {"index", Value::integer(k + 1)},
          {"index0", Value::integer(k)},
          {"revindex", Value::integer(n - k)},
          {"revindex0", Value::integer(n - k - 1)},
          {"first", Value::boolean(k == 0)},
          {"last", Value::boolean(k == n - 1)},
          {"length", Value::integer(n)},
          {"depth", Value::integer(1)},
          {"depth0", Value::integer(0)},
      };
      if (k > 0) loop->items.emplace_back("previtem", items[static_cast<size_t>(k - 1)]);
      if (k + 1 < n) loop->items.emplace_back("nextitem", items[static_cast<size_t>(k + 1)]);
      scopes_.emplace_back();  // each iteration has its own variables, as in Jinja
      Status st = bind_targets(s, items[static_cast<size_t>(k)]);
      if (st.ok()) assign("loop", Value::of_dict(std::move(loop)));
      Flow flow = Flow::kNormal;
      if (st.ok()) st = exec(s.body, out, flow);
      scopes_.pop_back();
      BITNET_RETURN_IF_ERROR(st);
      if (flow == Flow::kBreak) break;
    }
    if (n == 0) {
      Flow flow = Flow::kNormal;
      BITNET_RETURN_IF_ERROR(exec(s.else_body, out, flow));
    }
    return {};
  }

  // ---- expressions ----

  Result<Value> eval(const Expr& e) {
    BITNET_RETURN_IF_ERROR(step(e.line));
    switch (e.kind) {
      case ExprKind::kLiteral: return e.literal;
      case ExprKind::kName: return lookup(e.name);
      case ExprKind::kAttr: {
        BITNET_ASSIGN_OR_RETURN(const Value obj, eval(*e.args[0]));
        return get_attr(e, obj, e.name);
      }
      case ExprKind::kItem: {
        BITNET_ASSIGN_OR_RETURN(const Value obj, eval(*e.args[0]));
        BITNET_ASSIGN_OR_RETURN(const Value key, eval(*e.args[1]));
        return get_item(e, obj, key);
      }
      case ExprKind::kSlice: return eval_slice(e);
      case ExprKind::kCall: return eval_call(e);
      case ExprKind::kFilter: {
        BITNET_ASSIGN_OR_RETURN(const Value v, eval(*e.args[0]));
        BITNET_ASSIGN_OR_RETURN(const Args args, eval_args(e, 1));
        return apply_filter(e.line, e.name, v, args);
      }
      case ExprKind::kTest: {
        BITNET_ASSIGN_OR_RETURN(const Value v, eval(*e.args[0]));
        BITNET_ASSIGN_OR_RETURN(const Args args, eval_args(e, 1));
        BITNET_ASSIGN_OR_RETURN(const bool r, apply_test(e.line, e.name, v, args));
        return Value::boolean(r != e.negate);
      }
      case ExprKind::kUnary: {
        BITNET_ASSIGN_OR_RETURN(const Value v, eval(*e.args[0]));
        if (v.kind == Kind::kInt) {
          if (e.op == "-" && v.i == std::numeric_limits<int64_t>::min()) return error(e.line, "integer overflow");
          return Value::integer(e.op == "-" ? -v.i : v.i);
        }
        if (v.kind == Kind::kBool) return Value::integer(e.op == "-" ? -int64_t{v.b} : int64_t{v.b});
        if (v.kind == Kind::kFloat) return Value::number(e.op == "-" ? -v.f : v.f);
        return error(e.line, fmt::format("bad operand type for unary {}: '{}'", e.op, kind_name(v.kind)));
      }
      case ExprKind::kBinary: {
        BITNET_ASSIGN_OR_RETURN(const Value a, eval(*e.args[0]));
        BITNET_ASSIGN_OR_RETURN(const Value b, eval(*e.args[1]));
        return binary(e, a, b);
      }
      case ExprKind::kAnd:
      case ExprKind::kOr: {
        BITNET_ASSIGN_OR_RETURN(Value a, eval(*e.args[0]));
        if (truthy(a) == (e.kind == ExprKind::kOr)) return a;
        return eval(*e.args[1]);
      }
      case ExprKind::kNot: {
        BITNET_ASSIGN_OR_RETURN(const Value v, eval(*e.args[0]));
        return Value::boolean(!truthy(v));
      }
      case ExprKind::kCompare: {
        BITNET_ASSIGN_OR_RETURN(Value a, eval(*e.args[0]));
        for (size_t k = 0; k < e.ops.size(); ++k) {
          BITNET_ASSIGN_OR_RETURN(Value b, eval(*e.args[k + 1]));
          BITNET_ASSIGN_OR_RETURN(const bool r, compare(e.line, e.ops[k], a, b));
          if (!r) return Value::boolean(false);
          a = std::move(b);
        }
        return Value::boolean(true);
      }
      case ExprKind::kCond: {
        BITNET_ASSIGN_OR_RETURN(const Value c, eval(*e.args[0]));
        if (truthy(c)) return eval(*e.args[1]);
        if (e.args.size() > 2) return eval(*e.args[2]);
        return Value::undefined();
      }
      case ExprKind::kList: {
        List items;
        for (const auto& a : e.args) {
          BITNET_ASSIGN_OR_RETURN(Value v, eval(*a));
          items.push_back(std::move(v));
        }
        BITNET_ASSIGN_OR_RETURN(Value list, make_list(e.line, std::move(items)));
        list.tuple = e.tuple;
        return list;
      }
      case ExprKind::kDict: {
        auto d = std::make_shared<Dict>();
        for (size_t k = 0; k < e.args.size(); ++k) {
          BITNET_ASSIGN_OR_RETURN(const Value key, eval(*e.args[k]));
          if (!key.is_string()) return error(e.line, "dictionary keys must be strings here");
          BITNET_ASSIGN_OR_RETURN(Value v, eval(*e.kwargs[k].second));
          if (v.kind == Kind::kDict && v.dict->is_namespace) return error(e.line, "a namespace cannot be stored in a dict");
          d->set(key.str(), std::move(v));
        }
        Value v = Value::of_dict(std::move(d));
        if (v.depth > static_cast<uint32_t>(limits_.max_depth)) return error(e.line, "dicts nested too deeply");
        return v;
      }
    }
    return internal_error("chat template: unknown expression");
  }

  Result<Args> eval_args(const Expr& e, size_t first) {
    Args args;
    for (size_t k = first; k < e.args.size(); ++k) {
      BITNET_ASSIGN_OR_RETURN(Value v, eval(*e.args[k]));
      args.pos.push_back(std::move(v));
    }
    for (const auto& [name, x] : e.kwargs) {
      BITNET_ASSIGN_OR_RETURN(Value v, eval(*x));
      args.kw.emplace_back(name, std::move(v));
    }
    return args;
  }

  Result<Value> get_attr(const Expr& e, const Value& obj, const std::string& name) {
    if (obj.is_undefined()) return error(e.line, fmt::format("undefined value has no attribute '{}'", name));
    if (obj.kind == Kind::kDict) {
      const Value* v = obj.dict->find(name);
      return v != nullptr ? *v : Value::undefined();
    }
    return Value::undefined();
  }

  Result<Value> get_item(const Expr& e, const Value& obj, const Value& key) {
    if (obj.is_undefined()) return error(e.line, "undefined value is not subscriptable");
    if (obj.kind == Kind::kDict) {
      if (!key.is_string()) return Value::undefined();
      const Value* v = obj.dict->find(key.str());
      return v != nullptr ? *v : Value::undefined();
    }
    if ((obj.kind == Kind::kList || obj.is_string()) && (key.kind == Kind::kInt || key.kind == Kind::kBool)) {
      int64_t i = key.kind == Kind::kBool ? int64_t{key.b} : key.i;
      if (obj.kind == Kind::kList) {
        const auto n = static_cast<int64_t>(obj.list->size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::undefined();
        return (*obj.list)[static_cast<size_t>(i)];
      }
      const std::vector<std::string_view> chars = utf8_chars(obj.str());
      const auto n = static_cast<int64_t>(chars.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined();
      return Value::string(std::string(chars[static_cast<size_t>(i)]));
    }
    return Value::undefined();
  }

  Result<Value> eval_slice(const Expr& e) {
    BITNET_ASSIGN_OR_RETURN(const Value obj, eval(*e.args[0]));
    Value parts[3];
    for (int k = 0; k < 3; ++k) {
      if (!e.has_slice_part[k]) continue;
      BITNET_ASSIGN_OR_RETURN(parts[k], eval(*e.args[static_cast<size_t>(k) + 1]));
      if (parts[k].kind != Kind::kInt && !parts[k].is_none()) return error(e.line, "slice indices must be integers");
    }
    const int64_t step_by = parts[2].kind == Kind::kInt ? parts[2].i : 1;
    if (step_by == 0) return error(e.line, "slice step cannot be zero");
    if (obj.kind == Kind::kList) {
      List out;
      for (size_t i : slice_indices(static_cast<int64_t>(obj.list->size()), parts[0], parts[1], step_by)) out.push_back((*obj.list)[i]);
      return make_list(e.line, std::move(out));
    }
    if (obj.is_string()) {
      const std::vector<std::string_view> chars = utf8_chars(obj.str());
      std::string out;
      for (size_t i : slice_indices(static_cast<int64_t>(chars.size()), parts[0], parts[1], step_by)) out.append(chars[i]);
      return make_string(e.line, std::move(out));
    }
    if (obj.is_undefined()) return error(e.line, "undefined value is not subscriptable");
    return Value::undefined();
  }

  Result<Value> eval_call(const Expr& e) {
    const Expr& callee = *e.args[0];
    if (callee.kind == ExprKind::kAttr) {
      BITNET_ASSIGN_OR_RETURN(const Value obj, eval(*callee.args[0]));
      if (obj.is_string() || (obj.kind == Kind::kDict && !obj.dict->is_namespace)) {
        BITNET_ASSIGN_OR_RETURN(const Args args, eval_args(e, 1));
        return call_method(e.line, obj, callee.name, args);
      }
      BITNET_ASSIGN_OR_RETURN(const Value f, get_attr(callee, obj, callee.name));
      return call_value(e, f);
    }
    BITNET_ASSIGN_OR_RETURN(const Value f, eval(callee));
    return call_value(e, f);
  }

  Result<Value> call_value(const Expr& e, const Value& f) {
    if (f.kind != Kind::kFunction) return error(e.line, fmt::format("'{}' object is not callable", kind_name(f.kind)));
    BITNET_ASSIGN_OR_RETURN(const Args args, eval_args(e, 1));
    switch (f.fn) {
      case Function::kRaiseException: {
        std::string message = to_str(args.get(0, "message"));
        if (message.size() > 500) message = message.substr(0, 500) + "...";
        return error(e.line, "the template raised an exception: " + message);
      }
      case Function::kNamespace: {
        auto d = std::make_shared<Dict>();
        d->is_namespace = true;
        for (const auto& [k, v] : args.kw) {
          if (v.kind == Kind::kDict && v.dict->is_namespace) return error(e.line, "a namespace cannot hold a namespace");
          d->set(k, v);
        }
        if (!args.pos.empty()) return error(e.line, "namespace() takes keyword arguments only here");
        return Value::of_dict(std::move(d));
      }
      case Function::kRange: {
        if (args.pos.empty() || args.pos.size() > 3 || !args.kw.empty()) return error(e.line, "range() takes 1 to 3 integers");
        for (const Value& v : args.pos)
          if (v.kind != Kind::kInt) return error(e.line, "range() takes integers");
        const int64_t start = args.pos.size() > 1 ? args.pos[0].i : 0;
        const int64_t stop = args.pos.size() > 1 ? args.pos[1].i : args.pos[0].i;
        const int64_t by = args.pos.size() > 2 ? args.pos[2].i : 1;
        if (by == 0) return error(e.line, "range() step must not be zero");
        List out;
        for (int64_t i = start; by > 0 ? i < stop : i > stop; i += by) {
          BITNET_RETURN_IF_ERROR(step(e.line));
          out.push_back(Value::integer(i));
          if (i > std::numeric_limits<int64_t>::max() - std::max<int64_t>(by, 0) ||
              i < std::numeric_limits<int64_t>::min() - std::min<int64_t>(by, 0)) {
            break;
          }
        }
        return make_list(e.line, std::move(out));
      }
    }
    return internal_error("chat template: unknown function");
  }

  Result<Value> call_method(int line, const Value& obj, const std::string& name, const Args& args) {
    if (obj.kind == Kind::kDict) {
      const Dict& d = *obj.dict;
      if (name == "items" || name == "keys" || name == "values") {
        List out;
        for (const auto& [k, v] : d.items) {
          if (name == "items") out.push_back(pair(k, v));
          else out.push_back(name == "keys" ? Value::string(k) : v);
        }
        return make_list(line, std::move(out));
      }
      if (name == "get") {
        const Value key = args.get(0, "key");
        const Value* v = key.is_string() ? d.find(key.str()) : nullptr;
        return v != nullptr ? *v : args.get(1, "default", Value::none());
      }
      return error(line, fmt::format("unknown dict method '{}'", name));
    }
    const std::string& s = obj.str();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const bool left = name != "rstrip", right = name != "lstrip";
      const Value chars = args.get(0, "chars");
      if (chars.is_string()) return make_string(line, std::string(py_strip_chars(s, chars.str(), left, right)));
      return make_string(line, std::string(py_strip(s, left, right)));
    }
    if (name == "upper") return make_string(line, py_upper(s));
    if (name == "lower") return make_string(line, py_lower(s));
    if (name == "capitalize") return make_string(line, py_capitalize(s));
    if (name == "title") return make_string(line, py_title(s));
    if (name == "startswith" || name == "endswith") {
      const Value x = args.get(0, "prefix");
      List options = x.kind == Kind::kList ? *x.list : List{x};
      for (const Value& o : options) {
        if (!o.is_string()) return error(line, name + "() takes strings");
        if (name == "startswith" ? s.starts_with(o.str()) : s.ends_with(o.str())) return Value::boolean(true);
      }
      return Value::boolean(false);
    }
    if (name == "replace") {
      const Value from = args.get(0, "old"), to = args.get(1, "new"), count = args.get(2, "count", Value::integer(-1));
      if (!from.is_string() || !to.is_string() || count.kind != Kind::kInt) return error(line, "replace() takes two strings and a count");
      return replace(line, s, from.str(), to.str(), count.i);
    }
    if (name == "split") {
      const Value sep = args.get(0, "sep", Value::none());
      const Value max_split = args.get(1, "maxsplit", Value::integer(-1));
      if (max_split.kind != Kind::kInt) return error(line, "split() takes an integer maxsplit");
      List out;
      if (sep.is_none()) {
        if (max_split.i >= 0) return error(line, "split() on whitespace with maxsplit is not supported");
        for (std::string& w : py_split(s)) out.push_back(Value::string(std::move(w)));
      } else {
        if (!sep.is_string() || sep.str().empty()) return error(line, "split() takes a non-empty separator");
        size_t at = 0;
        for (int64_t n = 0; max_split.i < 0 || n < max_split.i; ++n) {
          const size_t hit = s.find(sep.str(), at);
          if (hit == std::string::npos) break;
          out.push_back(Value::string(s.substr(at, hit - at)));
          at = hit + sep.str().size();
        }
        out.push_back(Value::string(s.substr(at)));
      }
      return make_list(line, std::move(out));
    }
    if (name == "find" || name == "count") {
      const Value sub = args.get(0, "sub");
      if (!sub.is_string()) return error(line, name + "() takes a string");
      if (name == "find") {
        const size_t at = s.find(sub.str());
        return Value::integer(at == std::string::npos ? -1 : static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, at))));
      }
      if (sub.str().empty()) return Value::integer(static_cast<int64_t>(utf8_length(s)) + 1);
      int64_t n = 0;
      for (size_t at = s.find(sub.str()); at != std::string::npos; at = s.find(sub.str(), at + sub.str().size())) ++n;
      return Value::integer(n);
    }
    if (name == "join") {
      BITNET_ASSIGN_OR_RETURN(const List items, iterate(line, args.get(0, "iterable")));
      std::string out;
      for (size_t k = 0; k < items.size(); ++k) {
        if (!items[k].is_string()) return error(line, "join() takes strings");
        if (k > 0) out += s;
        out += items[k].str();
        if (out.size() > limits_.max_output_bytes) break;
      }
      return make_string(line, std::move(out));
    }
    return error(line, fmt::format("unknown string method '{}'", name));
  }

  Result<Value> replace(int line, const std::string& s, const std::string& from, const std::string& to, int64_t count) {
    std::string out;
    if (from.empty()) {  // Python inserts `to` around every character
      const std::vector<std::string_view> chars = utf8_chars(s);
      int64_t n = 0;
      for (std::string_view c : chars) {
        if (count < 0 || n++ < count) out += to;
        out.append(c);
        if (out.size() > limits_.max_output_bytes) break;
      }
      if (count < 0 || n < count) out += to;
      return make_string(line, std::move(out));
    }
    size_t at = 0;
    for (int64_t n = 0; count < 0 || n < count; ++n) {
      const size_t hit = s.find(from, at);
      if (hit == std::string::npos) break;
      out.append(s, at, hit - at);
      out += to;
      at = hit + from.size();
      if (out.size() > limits_.max_output_bytes) break;
    }
    out.append(s, at, std::string::npos);
    return make_string(line, std::move(out));
  }

  // A (key, value) tuple of dict.items().
  static Value pair(const std::string& key, const Value& v) {
    Value p = Value::of_list({Value::string(key), v});
    p.tuple = true;
    return p;
  }

  static Result<double> to_double(const Value& v) {
    if (v.kind == Kind::kFloat) return v.f;
    if (v.kind == Kind::kInt) return static_cast<double>(v.i);
    if (v.kind == Kind::kBool) return v.b ? 1.0 : 0.0;
    return invalid_argument("not a number");
  }

  Result<Value> binary(const Expr& e, const Value& a, const Value& b) {
    const std::string& op = e.op;
    if (op == "~") return make_string(e.line, to_str(a) + to_str(b));
    if (a.is_undefined() || b.is_undefined()) return error(e.line, fmt::format("undefined value in '{}'", op));
    const bool ints = (a.kind == Kind::kInt || a.kind == Kind::kBool) && (b.kind == Kind::kInt || b.kind == Kind::kBool);
    const int64_t ai = a.kind == Kind::kBool ? int64_t{a.b} : a.i, bi = b.kind == Kind::kBool ? int64_t{b.b} : b.i;
    const auto type_error = [&] {
      return error(e.line, fmt::format("unsupported operand types for {}: '{}' and '{}'", op, kind_name(a.kind), kind_name(b.kind)));
    };
    if (op == "+") {
      if (a.is_string() && b.is_string()) return make_string(e.line, a.str() + b.str());
      if (a.kind == Kind::kList && b.kind == Kind::kList) {
        List out = *a.list;
        out.insert(out.end(), b.list->begin(), b.list->end());
        return make_list(e.line, std::move(out));
      }
    }
    if (op == "*" && (a.is_string() || a.kind == Kind::kList || b.is_string() || b.kind == Kind::kList)) {
      const Value& seq = (a.is_string() || a.kind == Kind::kList) ? a : b;
      const Value& n = &seq == &a ? b : a;
      if (n.kind != Kind::kInt && n.kind != Kind::kBool) return type_error();
      const int64_t times = std::max<int64_t>(0, n.kind == Kind::kBool ? int64_t{n.b} : n.i);
      const size_t unit = seq.is_string() ? seq.str().size() : seq.list->size() * 8;
      if (unit > 0 && static_cast<uint64_t>(times) > limits_.max_output_bytes / unit) return error(e.line, "repetition too large");
      if (seq.is_string()) {
        std::string out;
        for (int64_t k = 0; k < times; ++k) out += seq.str();
        return make_string(e.line, std::move(out));
      }
      List out;
      for (int64_t k = 0; k < times; ++k) out.insert(out.end(), seq.list->begin(), seq.list->end());
      return make_list(e.line, std::move(out));
    }
    if (!a.is_number() || !b.is_number()) return type_error();
    if (ints && op != "/") {
      int64_t r = 0;
      bool overflow = false;
      if (op == "+") overflow = __builtin_add_overflow(ai, bi, &r);
      else if (op == "-") overflow = __builtin_sub_overflow(ai, bi, &r);
      else if (op == "*") overflow = __builtin_mul_overflow(ai, bi, &r);
      else if (op == "//" || op == "%") {
        if (bi == 0) return error(e.line, "integer division or modulo by zero");
        if (ai == std::numeric_limits<int64_t>::min() && bi == -1) return error(e.line, "integer overflow");
        int64_t q = ai / bi, m = ai % bi;
        if (m != 0 && ((m < 0) != (bi < 0))) {
          --q;
          m += bi;
        }
        r = op == "//" ? q : m;
      } else if (op == "**") {
        if (bi < 0) return Value::number(std::pow(static_cast<double>(ai), static_cast<double>(bi)));
        r = 1;
        for (int64_t k = 0; k < bi && !overflow; ++k) {
          overflow = __builtin_mul_overflow(r, ai, &r);
          if (r == 0 || r == 1) break;
        }
        if (ai == -1) r = (bi % 2 == 0) ? 1 : -1;
      }
      if (overflow) return error(e.line, "integer overflow");
      return Value::integer(r);
    }
    const double x = *to_double(a), y = *to_double(b);
    if (op == "+") return Value::number(x + y);
    if (op == "-") return Value::number(x - y);
    if (op == "*") return Value::number(x * y);
    if (op == "**") return Value::number(std::pow(x, y));
    if (y == 0.0) return error(e.line, "division by zero");
    if (op == "/") return Value::number(x / y);
    if (op == "//") return Value::number(std::floor(x / y));
    double m = std::fmod(x, y);
    if (m != 0.0 && ((m < 0) != (y < 0))) m += y;
    return Value::number(m);
  }

  Result<bool> compare(int line, const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return equal(a, b);
    if (op == "!=") return !equal(a, b);
    if (op == "in" || op == "not in") {
      bool found = false;
      if (b.is_string()) {
        if (!a.is_string()) return error(line, fmt::format("'in <string>' requires a string, not '{}'", kind_name(a.kind)));
        found = b.str().find(a.str()) != std::string::npos;
      } else if (b.kind == Kind::kList) {
        for (const Value& v : *b.list) found = found || equal(a, v);
      } else if (b.kind == Kind::kDict && !b.dict->is_namespace) {
        found = a.is_string() && b.dict->find(a.str()) != nullptr;
      } else if (!b.is_undefined()) {
        return error(line, fmt::format("argument of type '{}' is not iterable", kind_name(b.kind)));
      }
      return found != (op == "not in");
    }
    int c = 0;
    if (a.is_number() && b.is_number()) {
      const double x = *to_double(a), y = *to_double(b);
      c = x < y ? -1 : x > y ? 1 : 0;
      if (std::isnan(x) || std::isnan(y)) return false;
    } else if (a.is_string() && b.is_string()) {
      c = a.str().compare(b.str());
    } else {
      return error(line, fmt::format("'{}' not supported between '{}' and '{}'", op, kind_name(a.kind), kind_name(b.kind)));
    }
    if (op == "<") return c < 0;
    if (op == "<=") return c <= 0;
    if (op == ">") return c > 0;
    return c >= 0;
  }

  Result<bool> apply_test(int line, const std::string& name, const Value& v, const Args& args) {
    const Value arg = args.get(0, "value");
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "boolean") return v.kind == Kind::kBool;
    if (name == "true") return v.kind == Kind::kBool && v.b;
    if (name == "false") return v.kind == Kind::kBool && !v.b;
    if (name == "integer") return v.kind == Kind::kInt;
    if (name == "float") return v.kind == Kind::kFloat;
    if (name == "number") return v.is_number();
    if (name == "string") return v.is_string();
    if (name == "mapping") return v.kind == Kind::kDict && !v.dict->is_namespace;
    if (name == "iterable" || name == "sequence") {
      return v.is_string() || v.kind == Kind::kList || (v.kind == Kind::kDict && !v.dict->is_namespace);
    }
    if (name == "callable") return v.kind == Kind::kFunction;
    if (name == "lower" || name == "upper") {
      const std::string s = to_str(v);
      return name == "lower" ? py_lower(s) == s && py_upper(s) != s : py_upper(s) == s && py_lower(s) != s;
    }
    if (name == "even" || name == "odd" || name == "divisibleby") {
      if (v.kind != Kind::kInt || (name == "divisibleby" && (arg.kind != Kind::kInt || arg.i == 0))) {
        return error(line, fmt::format("test '{}' takes integers", name));
      }
      const int64_t d = name == "divisibleby" ? arg.i : 2;
      const bool divisible = v.i % d == 0;
      return name == "odd" ? !divisible : divisible;
    }
    if (name == "eq" || name == "equalto") return equal(v, arg);
    if (name == "ne") return !equal(v, arg);
    if (name == "in") return compare(line, "in", v, arg);
    if (name == "lt" || name == "le" || name == "gt" || name == "ge") {
      const char* op = name == "lt" ? "<" : name == "le" ? "<=" : name == "gt" ? ">" : ">=";
      return compare(line, op, v, arg);
    }
    return error(line, fmt::format("unknown test '{}'", name));
  }

  Result<Value> apply_filter(int line, const std::string& name, const Value& v, const Args& args) {
    if (name == "default" || name == "d") {
      const bool boolean = truthy(args.get(1, "boolean", Value::boolean(false)));
      const bool use_default = v.is_undefined() || (boolean && !truthy(v));
      return use_default ? args.get(0, "default_value", Value::string("")) : v;
    }
    if (name == "length" || name == "count") {
      switch (v.kind) {
        case Kind::kUndefined: return Value::integer(0);
        case Kind::kString: return Value::integer(static_cast<int64_t>(utf8_length(v.str())));
        case Kind::kList: return Value::integer(static_cast<int64_t>(v.list->size()));
        case Kind::kDict: return Value::integer(static_cast<int64_t>(v.dict->items.size()));
        default: return error(line, fmt::format("object of type '{}' has no len()", kind_name(v.kind)));
      }
    }
    if (name == "trim") {
      const Value chars = args.get(0, "chars");
      if (chars.is_string()) return make_string(line, std::string(py_strip_chars(to_str(v), chars.str(), true, true)));
      return make_string(line, std::string(py_strip(to_str(v), true, true)));
    }
    if (name == "upper") return make_string(line, py_upper(to_str(v)));
    if (name == "lower") return make_string(line, py_lower(to_str(v)));
    if (name == "capitalize") return make_string(line, py_capitalize(to_str(v)));
    if (name == "title") return make_string(line, jinja_title(to_str(v)));
    if (name == "string") return make_string(line, to_str(v));
    if (name == "safe") return v;
    if (name == "e" || name == "escape") {
      std::string out;
      for (char c : to_str(v)) {
        switch (c) {
          case '&': out += "&amp;"; break;
          case '<': out += "&lt;"; break;
          case '>': out += "&gt;"; break;
          case '"': out += "&#34;"; break;
          case '\'': out += "&#39;"; break;
          default: out += c;
        }
      }
      return make_string(line, std::move(out));
    }
    if (name == "replace") {
      const Value from = args.get(0, "old"), to = args.get(1, "new"), count = args.get(2, "count", Value::none());
      if (!from.is_string() || !to.is_string()) return error(line, "replace takes two strings");
      if (!count.is_none() && count.kind != Kind::kInt) return error(line, "replace takes an integer count");
      return replace(line, to_str(v), from.str(), to.str(), count.is_none() ? -1 : count.i);
    }
    if (name == "tojson") {
      for (const auto& [k, x] : args.kw) {
        if (k != "indent") return error(line, fmt::format("tojson: argument '{}' is not supported", k));
      }
      const Value indent = args.get(0, "indent", Value::none());
      if (!indent.is_none() && (indent.kind != Kind::kInt || indent.i < 0 || indent.i > 16)) {
        return error(line, "tojson: indent must be an integer in [0, 16]");
      }
      std::string json = to_json(v, indent.is_none() ? -1 : static_cast<int>(indent.i));
      if (json.empty()) return error(line, fmt::format("tojson: a '{}' is not JSON serializable", kind_name(v.kind)));
      return make_string(line, std::move(json));
    }
    if (name == "abs") {
      if (v.kind == Kind::kInt) {
        if (v.i == std::numeric_limits<int64_t>::min()) return error(line, "integer overflow");
        return Value::integer(v.i < 0 ? -v.i : v.i);
      }
      if (v.kind == Kind::kFloat) return Value::number(std::fabs(v.f));
      if (v.kind == Kind::kBool) return Value::integer(v.b);
      return error(line, fmt::format("bad operand type for abs(): '{}'", kind_name(v.kind)));
    }
    if (name == "int" || name == "float") return to_number(line, name == "int", v, args);
    if (name == "first" || name == "last") {
      BITNET_ASSIGN_OR_RETURN(const List items, iterate(line, v));
      if (items.empty()) return Value::undefined();
      return name == "first" ? items.front() : items.back();
    }
    if (name == "list") {
      BITNET_ASSIGN_OR_RETURN(List items, iterate(line, v));
      return make_list(line, std::move(items));
    }
    if (name == "reverse") {
      if (v.is_string()) {
        const std::vector<std::string_view> chars = utf8_chars(v.str());
        std::string out;
        for (auto c = chars.rbegin(); c != chars.rend(); ++c) out.append(*c);
        return make_string(line, std::move(out));
      }
      BITNET_ASSIGN_OR_RETURN(List items, iterate(line, v));
      std::reverse(items.begin(), items.end());
      return make_list(line, std::move(items));
    }
    if (name == "items") {
      if (v.is_undefined()) return make_list(line, {});
      if (v.kind != Kind::kDict || v.dict->is_namespace) return error(line, "items takes a mapping");
      List out;
      for (const auto& [k, x] : v.dict->items) out.push_back(pair(k, x));
      return make_list(line, std::move(out));
    }
    if (name == "join") {
      BITNET_ASSIGN_OR_RETURN(const List items, iterate(line, v));
      const std::string sep = to_str(args.get(0, "d", Value::string("")));
      const Value attribute = args.get(1, "attribute", Value::none());
      std::string out;
      for (size_t k = 0; k < items.size(); ++k) {
        if (k > 0) out += sep;
        if (attribute.is_none()) {
          out += to_str(items[k]);
        } else {
          BITNET_ASSIGN_OR_RETURN(const Value x, attribute_of(line, items[k], attribute));
          out += to_str(x);
        }
        if (out.size() > limits_.max_output_bytes) break;
      }
      return make_string(line, std::move(out));
    }
    if (name == "indent") return indent(line, to_str(v), args);
    if (name == "map") {
      BITNET_ASSIGN_OR_RETURN(const List items, iterate(line, v));
      const Value attribute = args.keyword("attribute");
      List out;
      for (const Value& item : items) {
        BITNET_RETURN_IF_ERROR(step(line));
        if (!attribute.is_undefined()) {
          BITNET_ASSIGN_OR_RETURN(Value x, attribute_of(line, item, attribute));
          out.push_back(x.is_undefined() ? args.keyword("default") : std::move(x));
        } else {
          if (args.pos.empty() || !args.pos[0].is_string()) return error(line, "map takes a filter name or attribute=");
          const std::string& filter = args.pos[0].str();
          if (filter == "map") return error(line, "map(map) is not supported");
          Args rest{std::vector<Value>(args.pos.begin() + 1, args.pos.end()), args.kw};
          BITNET_ASSIGN_OR_RETURN(Value x, apply_filter(line, filter, item, rest));
          out.push_back(std::move(x));
        }
      }
      return make_list(line, std::move(out));
    }
    if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
      BITNET_ASSIGN_OR_RETURN(const List items, iterate(line, v));
      const bool by_attr = name.ends_with("attr");
      const bool keep_if = name.starts_with("select");
      const size_t first = by_attr ? 1 : 0;
      if (by_attr && args.pos.empty()) return error(line, name + " takes an attribute name");
      List out;
      for (const Value& item : items) {
        BITNET_RETURN_IF_ERROR(step(line));
        Value x = item;
        if (by_attr) {
          BITNET_ASSIGN_OR_RETURN(x, attribute_of(line, item, args.pos[0]));
        }
        bool pass = false;
        if (args.pos.size() <= first) {
          pass = truthy(x);
        } else {
          if (!args.pos[first].is_string()) return error(line, name + " takes a test name");
          const std::string& test = args.pos[first].str();
          if (test == "==" || test == "!=") {
            pass = equal(x, args.get(first + 1, "")) == (test == "==");
          } else {
            Args rest{std::vector<Value>(args.pos.begin() + static_cast<std::ptrdiff_t>(first) + 1, args.pos.end()), {}};
            BITNET_ASSIGN_OR_RETURN(pass, apply_test(line, test, x, rest));
          }
        }
        if (pass == keep_if) out.push_back(item);
      }
      return make_list(line, std::move(out));
    }
    return error(line, fmt::format("unknown filter '{}'", name));
  }

  // item.attr or item["attr"], and "a.b" paths as Jinja's attribute= arguments take them.
  Result<Value> attribute_of(int line, const Value& item, const Value& attribute) {
    if (attribute.kind == Kind::kInt) {
      Expr e;
      e.line = line;
      return get_item(e, item, attribute);
    }
    if (!attribute.is_string()) return error(line, "attribute must be a string");
    Value x = item;
    size_t at = 0;
    while (true) {
      const size_t dot = attribute.str().find('.', at);
      const std::string part = attribute.str().substr(at, dot == std::string::npos ? std::string::npos : dot - at);
      if (x.kind != Kind::kDict) return Value::undefined();
      const Value* next = x.dict->find(part);
      if (next == nullptr) return Value::undefined();
      x = *next;
      if (dot == std::string::npos) return x;
      at = dot + 1;
    }
  }

  Result<Value> to_number(int line, bool as_int, const Value& v, const Args& args) {
    const Value def = args.get(0, "default", as_int ? Value::integer(0) : Value::number(0.0));
    double d = 0.0;
    if (v.kind == Kind::kInt || v.kind == Kind::kBool) {
      if (as_int) return Value::integer(v.kind == Kind::kBool ? int64_t{v.b} : v.i);
      d = static_cast<double>(v.kind == Kind::kBool ? int64_t{v.b} : v.i);
    } else if (v.kind == Kind::kFloat) {
      d = v.f;
    } else if (v.is_string()) {
      const std::string s(py_strip(v.str(), true, true));
      char* end = nullptr;
      if (s.empty()) return def;
      if (as_int) {
        errno = 0;
        const long long i = std::strtoll(s.c_str(), &end, 10);
        if (*end == '\0' && errno == 0) return Value::integer(i);
      }
      d = std::strtod(s.c_str(), &end);
      if (*end != '\0') return def;
    } else {
      return def;
    }
    if (!as_int) return Value::number(d);
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return error(line, "int: value out of range");
    return Value::integer(static_cast<int64_t>(d));
  }

  Result<Value> indent(int line, const std::string& s, const Args& args) {
    const Value width = args.get(0, "width", Value::integer(4));
    std::string pad;
    if (width.is_string()) pad = width.str();
    else if (width.kind == Kind::kInt && width.i >= 0 && width.i <= 256) pad.assign(static_cast<size_t>(width.i), ' ');
    else return error(line, "indent: width must be a string or an integer in [0, 256]");
    const bool first = truthy(args.get(1, "first", Value::boolean(false)));
    const bool blank = truthy(args.get(2, "blank", Value::boolean(false)));
    std::vector<std::string_view> lines;
    const std::string_view text(s);
    for (size_t at = 0; at < text.size();) {
      const size_t nl = text.find('\n', at);
      lines.push_back(text.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at));
      if (nl == std::string_view::npos) break;
      at = nl + 1;
    }
    std::string out;
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k > 0) {
        out += '\n';
        if (blank || !lines[k].empty()) out += pad;
      }
      out.append(lines[k]);
      if (out.size() > limits_.max_output_bytes) break;
    }
    if (first && (blank || !s.empty())) out = pad + out;
    return make_string(line, std::move(out));
  }

  const TemplateLimits& limits_;
  std::vector<Scope> scopes_;
  uint64_t steps_ = 0;
};

}  // namespace

Result<std::string> render(const Program& program, const std::vector<std::pair<std::string, Value>>& vars,
                           const TemplateLimits& limits) {
  std::string out;
  try {
    BITNET_RETURN_IF_ERROR(Renderer(limits).run(program, vars, out));
  } catch (const std::bad_alloc&) {
    return out_of_memory("chat template: out of memory while rendering");
  }
  return out;
}

}  // namespace bitnet::chat::jinja
