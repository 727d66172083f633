// Values of the Jinja subset: Python's types as templates see them (None, bool, int, float,
// str, list, dict) plus Jinja's undefined. Strings, lists and dicts are shared and immutable
// once made (Hugging Face renders in an ImmutableSandboxedEnvironment), except namespace
// objects, whose attributes `{% set ns.x = ... %}` assigns.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bitnet::chat::jinja {

struct Value;
using List = std::vector<Value>;
struct Dict;

enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

// Global functions a template may call.
enum class Function { kRaiseException, kNamespace, kRange };

struct Value {
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  Function fn = Function::kRange;
  uint32_t depth = 0;  // nesting of lists and dicts (0 for scalars); bounded while rendering
  bool tuple = false;  // a list made as a Python tuple: (a, b), dict.items() pairs (only repr differs)
  std::shared_ptr<const std::string> s;
  std::shared_ptr<const List> list;
  std::shared_ptr<Dict> dict;

  static Value undefined() { return {}; }
  static Value none() { return make(Kind::kNone); }
  static Value boolean(bool v) { Value r = make(Kind::kBool); r.b = v; return r; }
  static Value integer(int64_t v) { Value r = make(Kind::kInt); r.i = v; return r; }
  static Value number(double v) { Value r = make(Kind::kFloat); r.f = v; return r; }
  static Value string(std::string v) {
    Value r = make(Kind::kString);
    r.s = std::make_shared<const std::string>(std::move(v));
    return r;
  }
  static Value of_list(List v) {
    Value r = make(Kind::kList);
    for (const Value& x : v) r.depth = std::max(r.depth, x.depth);
    ++r.depth;
    r.list = std::make_shared<const List>(std::move(v));
    return r;
  }
  static Value of_dict(std::shared_ptr<Dict> d);
  static Value function(Function f) { Value r = make(Kind::kFunction); r.fn = f; return r; }

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool; }
  const std::string& str() const { return *s; }

 private:
  static Value make(Kind k) { Value r; r.kind = k; return r; }
};

// String keys in insertion order (Python dicts keep it; tojson and items() show it).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;

  const Value* find(std::string_view key) const {
    for (const auto& [k, v] : items)
      if (k == key) return &v;
    return nullptr;
  }
  void set(std::string key, Value v) {
    for (auto& [k, old] : items)
      if (k == key) { old = std::move(v); return; }
    items.emplace_back(std::move(key), std::move(v));
  }
};

inline Value Value::of_dict(std::shared_ptr<Dict> d) {
  Value r = make(Kind::kDict);
  for (const auto& item : d->items) r.depth = std::max(r.depth, item.second.depth);
  ++r.depth;
  r.dict = std::move(d);
  return r;
}

// Python's truth value.
bool truthy(const Value& v);
// Python's str() (Jinja prints undefined as "").
std::string to_str(const Value& v);
// Python's repr() (inside lists and dicts).
std::string to_repr(const Value& v);
// == as Python compares (1 == 1.0 == True; lists and dicts element by element).
bool equal(const Value& a, const Value& b);
// json.dumps(v, ensure_ascii=False, indent=indent) as Hugging Face's tojson filter calls it;
// indent < 0 is None (one line, ", " and ": ").
std::string to_json(const Value& v, int indent);
const char* kind_name(Kind k);

// Python's str methods on UTF-8 text. Whitespace is Python's (str.isspace()); case mapping is
// Unicode's default full mapping (ICU). Invalid UTF-8 bytes count as one character each.
std::vector<std::string_view> utf8_chars(std::string_view s);
size_t utf8_length(std::string_view s);
// strip(), lstrip(), rstrip() without arguments (whitespace) or with a set of characters.
std::string_view py_strip(std::string_view s, bool left, bool right);
std::string_view py_strip_chars(std::string_view s, std::string_view chars, bool left, bool right);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);  // str.capitalize()
std::string jinja_title(std::string_view s);    // Jinja's title filter
std::string py_title(std::string_view s);       // str.title()
std::vector<std::string> py_split(std::string_view s);  // str.split() on whitespace runs

}  // namespace bitnet::chat::jinja
