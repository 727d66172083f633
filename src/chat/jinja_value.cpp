#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include <unicode/uchar.h>
#include <unicode/ustring.h>

#include "model/tokenizer/unicode.h"

namespace bitnet::chat::jinja {

namespace {

// One UTF-8 character at s[i]: its code point and length (an invalid byte is one character,
// code point 0xFFFD).
std::pair<uint32_t, size_t> decode_utf8(std::string_view s, size_t i) {
  const auto b = static_cast<uint8_t>(s[i]);
  const auto cont = [&](size_t k) { return i + k < s.size() && (static_cast<uint8_t>(s[i + k]) & 0xC0) == 0x80; };
  if (b < 0x80) return {b, 1};
  if (b >= 0xC2 && b < 0xE0 && cont(1)) return {((b & 0x1Fu) << 6) | (static_cast<uint8_t>(s[i + 1]) & 0x3Fu), 2};
  if (b >= 0xE0 && b < 0xF0 && cont(1) && cont(2)) {
    return {((b & 0x0Fu) << 12) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 6) | (static_cast<uint8_t>(s[i + 2]) & 0x3Fu), 3};
  }
  if (b >= 0xF0 && b < 0xF5 && cont(1) && cont(2) && cont(3)) {
    return {((b & 0x07u) << 18) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 12) |
                ((static_cast<uint8_t>(s[i + 2]) & 0x3Fu) << 6) | (static_cast<uint8_t>(s[i + 3]) & 0x3Fu),
            4};
  }
  return {0xFFFD, 1};
}

// Python's str.isspace() for one code point.
bool is_py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; }
char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // Python: fixed notation for 1e-4 <= |v| < 1e16, else scientific, both shortest round trip.
  char buf[64];
  const double a = std::fabs(v);
  const bool fixed = a == 0.0 || (a >= 1e-4 && a < 1e16);
  const auto r = std::to_chars(buf, buf + sizeof buf, v, fixed ? std::chars_format::fixed : std::chars_format::scientific);
  std::string out(buf, r.ptr);
  if (fixed && out.find('.') == std::string::npos) out += ".0";
  return out;
}

std::string string_repr(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    const auto u = static_cast<uint8_t>(c);
    if (c == '\\') out += "\\\\";
    else if (c == q) { out += '\\'; out += c; }
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += q;
  return out;
}

void json_string(const std::string& s, std::string& out) {
  out += '"';
  for (char c : s) {
    const auto u = static_cast<uint8_t>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (u < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", u);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

bool json_value(const Value& v, int indent, int level, std::string& out) {
  const auto newline = [&](int lvl) {
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(lvl), ' ');
  };
  const char* item_sep = indent >= 0 ? "," : ", ";
  switch (v.kind) {
    case Kind::kNone: out += "null"; return true;
    case Kind::kBool: out += v.b ? "true" : "false"; return true;
    case Kind::kInt: out += std::to_string(v.i); return true;
    case Kind::kFloat:
      out += std::isnan(v.f) ? "NaN" : std::isinf(v.f) ? (v.f > 0 ? "Infinity" : "-Infinity") : float_repr(v.f);
      return true;
    case Kind::kString: json_string(v.str(), out); return true;
    case Kind::kList: {
      if (v.list->empty()) { out += "[]"; return true; }
      out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k > 0) out += item_sep;
        if (indent >= 0) newline(level + 1);
        if (!json_value((*v.list)[k], indent, level + 1, out)) return false;
      }
      if (indent >= 0) newline(level);
      out += ']';
      return true;
    }
    case Kind::kDict: {
      if (v.dict->is_namespace) return false;
      if (v.dict->items.empty()) { out += "{}"; return true; }
      out += '{';
      for (size_t k = 0; k < v.dict->items.size(); ++k) {
        if (k > 0) out += item_sep;
        if (indent >= 0) newline(level + 1);
        json_string(v.dict->items[k].first, out);
        out += ": ";
        if (!json_value(v.dict->items[k].second, indent, level + 1, out)) return false;
      }
      if (indent >= 0) newline(level);
      out += '}';
      return true;
    }
    case Kind::kUndefined:
    case Kind::kFunction: return false;
  }
  return false;
}

double as_double(const Value& v) {
  return v.kind == Kind::kFloat ? v.f : v.kind == Kind::kBool ? (v.b ? 1.0 : 0.0) : static_cast<double>(v.i);
}

}  // namespace

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return "list";
    case Kind::kDict: return "dict";
    case Kind::kFunction: return "function";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return v.b;
    case Kind::kInt: return v.i != 0;
    case Kind::kFloat: return v.f != 0.0;
    case Kind::kString: return !v.s->empty();
    case Kind::kList: return !v.list->empty();
    case Kind::kDict: return v.dict->is_namespace || !v.dict->items.empty();
    case Kind::kFunction: return true;
  }
  return false;
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined: return "";
    case Kind::kString: return v.str();
    default: return to_repr(v);
  }
}

std::string to_repr(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return v.b ? "True" : "False";
    case Kind::kInt: return std::to_string(v.i);
    case Kind::kFloat: return float_repr(v.f);
    case Kind::kString: return string_repr(v.str());
    case Kind::kList: {
      std::string out = v.tuple ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) out += (k > 0 ? ", " : "") + to_repr((*v.list)[k]);
      if (v.tuple) return out + (v.list->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::kDict: {
      if (v.dict->is_namespace) return "<Namespace>";
      std::string out = "{";
      for (size_t k = 0; k < v.dict->items.size(); ++k) {
        out += (k > 0 ? ", " : "") + string_repr(v.dict->items[k].first) + ": " + to_repr(v.dict->items[k].second);
      }
      return out + "}";
    }
    case Kind::kFunction: return "<function>";
  }
  return "";
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind != Kind::kFloat && b.kind != Kind::kFloat) {
      return (a.kind == Kind::kBool ? int64_t{a.b} : a.i) == (b.kind == Kind::kBool ? int64_t{b.b} : b.i);
    }
    return as_double(a) == as_double(b);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return a.str() == b.str();
    case Kind::kList: {
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equal((*a.list)[k], (*b.list)[k])) return false;
      return true;
    }
    case Kind::kDict: {
      if (a.dict->is_namespace || b.dict->is_namespace) return a.dict == b.dict;
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* o = b.dict->find(k);
        if (o == nullptr || !equal(v, *o)) return false;
      }
      return true;
    }
    case Kind::kFunction: return a.fn == b.fn;
    default: return false;
  }
}

std::string to_json(const Value& v, int indent) {
  std::string out;
  if (!json_value(v, indent, 0, out)) return {};
  return out;
}

std::vector<std::string_view> utf8_chars(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = decode_utf8(s, i).second;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += decode_utf8(s, i).second) ++n;
  return n;
}

std::string_view py_strip(std::string_view s, bool left, bool right) {
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end) {
      const auto [c, n] = decode_utf8(s, begin);
      if (!is_py_space(c)) break;
      begin += n;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;  // back to the first byte of the last character
      while (start > begin && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80 && end - start < 4) --start;
      const auto [c, n] = decode_utf8(s, start);
      if (start + n != end) {  // not one valid character: a lone continuation byte
        if (is_py_space(static_cast<uint8_t>(s[end - 1]))) { --end; continue; }
        break;
      }
      if (!is_py_space(c)) break;
      end = start;
    }
  }
  return s.substr(begin, end - begin);
}

std::string_view py_strip_chars(std::string_view s, std::string_view chars, bool left, bool right) {
  const std::vector<std::string_view> set = utf8_chars(chars);
  const std::vector<std::string_view> cs = utf8_chars(s);
  const auto in_set = [&](std::string_view c) {
    for (std::string_view x : set)
      if (x == c) return true;
    return false;
  };
  size_t b = 0, e = cs.size();
  while (left && b < e && in_set(cs[b])) ++b;
  while (right && e > b && in_set(cs[e - 1])) --e;
  if (b == e) return {};
  const size_t start = static_cast<size_t>(cs[b].data() - s.data());
  const size_t stop = static_cast<size_t>(cs[e - 1].data() - s.data()) + cs[e - 1].size();
  return s.substr(start, stop - start);
}

namespace {

// UTF-8 -> UTF-16 -> ICU case mapping -> UTF-8 (full mappings with the root locale, as
// Python's str.upper()/lower() apply Unicode's default case conversion).
enum class Case { kUpper, kLower };
std::string convert_case(std::string_view s, Case c) {
  if (std::all_of(s.begin(), s.end(), [](char ch) { return static_cast<uint8_t>(ch) < 0x80; })) {
    std::string out(s);
    for (char& ch : out) ch = c == Case::kUpper ? ascii_upper(ch) : ascii_lower(ch);
    return out;
  }
  std::u16string in;
  for (size_t i = 0; i < s.size();) {
    const auto [cp, n] = decode_utf8(s, i);
    if (cp >= 0x10000) {
      in += static_cast<char16_t>(0xD800 + ((cp - 0x10000) >> 10));
      in += static_cast<char16_t>(0xDC00 + ((cp - 0x10000) & 0x3FF));
    } else {
      in += static_cast<char16_t>(cp);
    }
    i += n;
  }
  std::u16string mapped(in.size() * 3 + 8, u'\0');
  UErrorCode err = U_ZERO_ERROR;
  const int32_t len = c == Case::kUpper
                          ? u_strToUpper(mapped.data(), static_cast<int32_t>(mapped.size()), in.data(),
                                         static_cast<int32_t>(in.size()), "", &err)
                          : u_strToLower(mapped.data(), static_cast<int32_t>(mapped.size()), in.data(),
                                         static_cast<int32_t>(in.size()), "", &err);
  if (U_FAILURE(err)) return std::string(s);
  std::string out;
  for (int32_t k = 0; k < len; ++k) {
    uint32_t cp = mapped[static_cast<size_t>(k)];
    if (cp >= 0xD800 && cp < 0xDC00 && k + 1 < len) {
      cp = 0x10000 + ((cp - 0xD800) << 10) + (mapped[static_cast<size_t>(++k)] - 0xDC00u);
    }
    tok::append_utf8(out, cp);
  }
  return out;
}

bool is_cased(uint32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASED) != 0; }

}  // namespace

std::string py_upper(std::string_view s) { return convert_case(s, Case::kUpper); }
std::string py_lower(std::string_view s) { return convert_case(s, Case::kLower); }

std::string py_capitalize(std::string_view s) {
  if (s.empty()) return {};
  const size_t n = decode_utf8(s, 0).second;
  return py_upper(s.substr(0, n)) + py_lower(s.substr(n));
}

std::string jinja_title(std::string_view s) {
  // Jinja splits on runs of whitespace, '-', '(', '{', '[' and '<' and, per piece, upper-cases
  // the first character and lower-cases the rest.
  std::string out;
  bool word_start = true;
  for (size_t i = 0; i < s.size();) {
    const auto [c, n] = decode_utf8(s, i);
    const bool sep = is_py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    out += sep ? std::string(s.substr(i, n)) : word_start ? py_upper(s.substr(i, n)) : py_lower(s.substr(i, n));
    word_start = sep;
    i += n;
  }
  return out;
}

std::string py_title(std::string_view s) {
  // A cased character is upper-cased after an uncased one and lower-cased after a cased one.
  std::string out;
  bool after_cased = false;
  for (size_t i = 0; i < s.size();) {
    const auto [c, n] = decode_utf8(s, i);
    const bool cased = is_cased(c);
    out += !cased ? std::string(s.substr(i, n)) : after_cased ? py_lower(s.substr(i, n)) : py_upper(s.substr(i, n));
    after_cased = cased;
    i += n;
  }
  return out;
}

std::vector<std::string> py_split(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0, word = std::string_view::npos;
  while (i < s.size()) {
    const auto [c, n] = decode_utf8(s, i);
    if (is_py_space(c)) {
      if (word != std::string_view::npos) out.emplace_back(s.substr(word, i - word));
      word = std::string_view::npos;
    } else if (word == std::string_view::npos) {
      word = i;
    }
    i += n;
  }
  if (word != std::string_view::npos) out.emplace_back(s.substr(word));
  return out;
}

}  // namespace bitnet::chat::jinja
