// Lexer and parser of the Jinja subset (jinja.h). The lexer mirrors jinja2.lexer's handling of
// whitespace (trim_blocks, lstrip_blocks, `-` and `+` modifiers); the parser mirrors the
// precedence of jinja2.parser (condexpr < or < and < not < compare < + - < ~ < * / // % < ** <
// unary, then postfix . [] () and filters/tests).
#include <algorithm>
#include <charconv>
#include <cstring>
#include <initializer_list>

#include <fmt/format.h>

#include "chat/jinja.h"
#include "model/tokenizer/unicode.h"

namespace bitnet::chat::jinja {

namespace {

enum class Tok { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok kind = Tok::kEof;
  int line = 0;
  std::string text;  // text, name, decoded string, operator
  int64_t i = 0;
  double f = 0.0;
};

// The filters and tests jinja_eval.cpp implements; any other name is a parse error.
constexpr const char* kFilters[] = {
    "abs", "capitalize", "count", "d", "default", "e", "escape", "first", "float", "indent", "int", "items",
    "join", "last", "length", "list", "lower", "map", "reject", "rejectattr", "replace", "reverse", "safe",
    "select", "selectattr", "string", "title", "tojson", "trim", "upper",
};
constexpr const char* kTests[] = {
    "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "even", "false", "float", "ge", "gt",
    "in", "integer", "iterable", "le", "lower", "lt", "mapping", "ne", "none", "number", "odd", "sequence",
    "string", "true", "undefined", "upper",
};

bool one_of(std::string_view s, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return s == n; });
}

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  Lexer(std::string source, std::vector<Token>& out) : src_(std::move(source)), out_(out) {}

  Status run() {
    bool line_starting = true;
    while (true) {
      size_t start = std::string::npos;
      for (const char* open : {"{{", "{%", "{#"}) start = std::min(start, src_.find(open, pos_));
      if (start == std::string::npos) {
        emit_text(src_.substr(pos_));
        break;
      }
      std::string text = src_.substr(pos_, start - pos_);
      const int text_line = line_;
      line_ += static_cast<int>(std::count(text.begin(), text.end(), '\n'));
      const char kind = src_[start + 1];
      char mod = start + 2 < src_.size() ? src_[start + 2] : '\0';
      if (mod == '+' && kind == '{') mod = '\0';  // `{{+x}}` is a unary plus
      if (mod == '-') {
        text = std::string(py_strip(text, false, true));
      } else if (kind != '{' && mod != '+') {
        // lstrip_blocks: spaces and tabs between the start of the line and a block or comment.
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
            std::all_of(text.begin() + static_cast<std::ptrdiff_t>(l_pos), text.end(), is_ascii_space)) {
          text.resize(l_pos);
        }
      }
      emit_text(std::move(text), text_line);
      pos_ = start + 2 + (mod == '-' || mod == '+' ? 1 : 0);
      if (kind == '#') {
        const size_t end = src_.find("#}", pos_);
        if (end == std::string::npos) return error("unclosed comment");
        line_ += static_cast<int>(std::count(src_.begin() + static_cast<std::ptrdiff_t>(pos_),
                                             src_.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
        const char end_mod = end > pos_ ? src_[end - 1] : '\0';
        pos_ = end + 2;
        line_starting = after_end(end_mod, true);
        continue;
      }
      out_.push_back({kind == '{' ? Tok::kVarBegin : Tok::kBlockBegin, line_, {}, 0, 0.0});
      BITNET_RETURN_IF_ERROR(lex_tag(kind));
      line_starting = after_end(end_mod_, kind == '%');
    }
    out_.push_back({Tok::kEof, line_, {}, 0, 0.0});
    return {};
  }

 private:
  Status error(const std::string& what) const {
    return invalid_argument(fmt::format("chat template: line {}: {}", line_, what));
  }

  void emit_text(std::string text, int line = 0) {
    if (!text.empty()) out_.push_back({Tok::kText, line == 0 ? line_ : line, std::move(text), 0, 0.0});
  }

  // After a tag's end: `-` strips the whitespace that follows, trim_blocks drops one newline
  // after a block or comment. Returns whether the last character consumed was a newline.
  bool after_end(char end_mod, bool is_block) {
    if (end_mod == '-') {
      const std::string_view rest(src_.data() + pos_, src_.size() - pos_);
      const size_t n = rest.size() - py_strip(rest, true, false).size();
      line_ += static_cast<int>(std::count(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(n), '\n'));
      pos_ += n;
      return n > 0 && src_[pos_ - 1] == '\n';
    }
    if (is_block && end_mod != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
      return true;
    }
    return false;
  }

  // Expression tokens up to the end of a `{{ }}` (kind '{') or `{% %}` (kind '%') tag.
  Status lex_tag(char kind) {
    std::vector<char> brackets;
    while (true) {
      while (pos_ < src_.size() && is_ascii_space(src_[pos_])) line_ += src_[pos_++] == '\n' ? 1 : 0;
      if (pos_ >= src_.size()) return error(kind == '{' ? "unclosed '{{'" : "unclosed '{%'");
      const std::string_view rest(src_.data() + pos_, src_.size() - pos_);
      if (brackets.empty()) {
        const char* close = kind == '{' ? "}}" : "%}";
        for (const char m : {'-', '+', '\0'}) {
          if (m == '+' && kind == '{') continue;
          const std::string marker = (m != '\0' ? std::string(1, m) : std::string()) + close;
          if (rest.starts_with(marker)) {
            pos_ += marker.size();
            end_mod_ = m;
            out_.push_back({kind == '{' ? Tok::kVarEnd : Tok::kBlockEnd, line_, {}, 0, 0.0});
            return {};
          }
        }
      }
      const char c = rest[0];
      if (is_name_start(c)) {
        size_t n = 1;
        while (n < rest.size() && (is_name_start(rest[n]) || is_digit(rest[n]))) ++n;
        out_.push_back({Tok::kName, line_, std::string(rest.substr(0, n)), 0, 0.0});
        pos_ += n;
      } else if (is_digit(c)) {
        BITNET_RETURN_IF_ERROR(lex_number(rest));
      } else if (c == '\'' || c == '"') {
        BITNET_RETURN_IF_ERROR(lex_string(rest));
      } else {
        static constexpr const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~",
                                               "[", "]", "(", ")", "{", "}", "<", ">", "=", ".", ":", "|", ","};
        const char* op = nullptr;
        for (const char* o : kOps) {
          if (rest.starts_with(o)) {
            op = o;
            break;
          }
        }
        if (op == nullptr) return error(fmt::format("unexpected character '{}'", c));
        if (std::strchr("([{", op[0]) != nullptr && op[1] == '\0') {
          if (brackets.size() >= 256) return error("brackets nested too deeply");
          brackets.push_back(op[0] == '(' ? ')' : op[0] == '[' ? ']' : '}');
        } else if (std::strchr(")]}", op[0]) != nullptr && op[1] == '\0') {
          if (brackets.empty() || brackets.back() != op[0]) return error(fmt::format("unexpected '{}'", op));
          brackets.pop_back();
        }
        out_.push_back({Tok::kOp, line_, op, 0, 0.0});
        pos_ += std::strlen(op);
      }
    }
  }

  Status lex_number(std::string_view rest) {
    size_t n = 0;
    std::string digits;
    const auto take_digits = [&] {
      while (n < rest.size() && (is_digit(rest[n]) || (rest[n] == '_' && n + 1 < rest.size() && is_digit(rest[n + 1])))) {
        if (rest[n] != '_') digits += rest[n];
        ++n;
      }
    };
    take_digits();
    bool is_float = false;
    if (n + 1 < rest.size() && rest[n] == '.' && is_digit(rest[n + 1])) {
      is_float = true;
      digits += rest[n++];
      take_digits();
    }
    if (n + 1 < rest.size() && (rest[n] == 'e' || rest[n] == 'E')) {
      size_t m = n + 1;
      if (m < rest.size() && (rest[m] == '+' || rest[m] == '-')) ++m;
      if (m < rest.size() && is_digit(rest[m])) {
        is_float = true;
        digits += 'e';
        digits += rest.substr(n + 1, m - n - 1);
        n = m;
        take_digits();
      }
    }
    Token t{is_float ? Tok::kFloat : Tok::kInt, line_, digits, 0, 0.0};
    if (is_float) {
      t.f = std::strtod(digits.c_str(), nullptr);
    } else {
      const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), t.i);
      if (r.ec != std::errc()) return error("integer literal too large");
    }
    out_.push_back(std::move(t));
    pos_ += n;
    return {};
  }

  // A quoted literal with Python's escapes (Jinja decodes with "unicode-escape").
  Status lex_string(std::string_view rest) {
    const char q = rest[0];
    std::string out;
    size_t n = 1;
    const int start_line = line_;
    while (true) {
      if (n >= rest.size()) return error("unterminated string");
      const char c = rest[n];
      if (c == q) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out += c;
        ++n;
        continue;
      }
      if (n + 1 >= rest.size()) return error("unterminated string");
      const char e = rest[n + 1];
      n += 2;
      const auto hex = [&](int width) -> Result<uint32_t> {
        if (n + static_cast<size_t>(width) > rest.size()) return error("truncated escape in string");
        uint32_t v = 0;
        for (int k = 0; k < width; ++k) {
          const char h = rest[n + static_cast<size_t>(k)];
          const int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
          if (d < 0) return error("bad hexadecimal escape in string");
          v = v * 16 + static_cast<uint32_t>(d);
        }
        n += static_cast<size_t>(width);
        return v;
      };
      switch (e) {
        case '\n': ++line_; break;  // line continuation
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          BITNET_ASSIGN_OR_RETURN(const uint32_t cp, hex(e == 'x' ? 2 : e == 'u' ? 4 : 8));
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return error("escape outside Unicode in string");
          tok::append_utf8(out, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {  // octal, up to 3 digits
            uint32_t v = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && n < rest.size() && rest[n] >= '0' && rest[n] <= '7'; ++k) v = v * 8 + static_cast<uint32_t>(rest[n++] - '0');
            tok::append_utf8(out, v);
          } else if (e == 'N') {
            return error("\\N{...} escapes are not supported");
          } else {
            out += '\\';  // Python keeps unknown escapes
            out += e;
          }
      }
    }
    out_.push_back({Tok::kString, start_line, std::move(out), 0, 0.0});
    pos_ += n + 1;
    return {};
  }

  std::string src_;
  std::vector<Token>& out_;
  size_t pos_ = 0;
  int line_ = 1;
  char end_mod_ = '\0';
};

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, int max_depth) : t_(tokens), max_depth_(max_depth) {}

  Status parse_template(Body& out) {
    std::string ended_by;
    return parse_body(out, {}, ended_by);
  }

 private:
  struct DepthGuard {
    explicit DepthGuard(int& d) : d_(d) { ++d_; }
    ~DepthGuard() { --d_; }
    int& d_;
  };

  const Token& peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool at_op(const char* op, size_t k = 0) const { return peek(k).kind == Tok::kOp && peek(k).text == op; }
  bool at_name(const char* name, size_t k = 0) const { return peek(k).kind == Tok::kName && peek(k).text == name; }

  Status error(const std::string& what) const {
    return invalid_argument(fmt::format("chat template: line {}: {}", peek().line, what));
  }
  Status deeper() const {
    return depth_ > max_depth_ ? error(fmt::format("nested more than {} levels", max_depth_)) : Status{};
  }
  // A chain of operators, filters or postfixes makes a tree as deep as it is long: each link
  // counts as a level, so that evaluating (recursively) stays within the depth limit.
  Status link(int& n_links) const {
    return depth_ + ++n_links > max_depth_ ? error(fmt::format("expression nested more than {} levels", max_depth_))
                                           : Status{};
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::kText: return "text";
      case Tok::kVarBegin: return "'{{'";
      case Tok::kVarEnd: return "'}}'";
      case Tok::kBlockBegin: return "'{%'";
      case Tok::kBlockEnd: return "'%}'";
      case Tok::kEof: return "the end of the template";
      case Tok::kString: return "a string";
      case Tok::kInt:
      case Tok::kFloat: return "a number";
      default: return "'" + t.text + "'";
    }
  }
  Status expect_op(const char* op) {
    if (!at_op(op)) return error(fmt::format("expected '{}', found {}", op, describe(peek())));
    ++i_;
    return {};
  }
  Status expect(Tok kind, const char* what) {
    if (peek().kind != kind) return error(fmt::format("expected {}, found {}", what, describe(peek())));
    ++i_;
    return {};
  }
  Result<std::string> expect_name() {
    if (peek().kind != Tok::kName) return error(fmt::format("expected a name, found {}", describe(peek())));
    return next().text;
  }

  // Statements until a `{% name %}` with name in `ends` (its name consumed, its end not).
  Status parse_body(Body& out, std::initializer_list<const char*> ends, std::string& ended_by) {
    DepthGuard guard(depth_);
    BITNET_RETURN_IF_ERROR(deeper());
    while (true) {
      const Token& t = peek();
      if (t.kind == Tok::kEof) {
        if (ends.size() == 0) return {};
        std::string names;
        for (const char* e : ends) names += (names.empty() ? "'" : " or '") + std::string(e) + "'";
        return error("missing " + names);
      }
      if (t.kind == Tok::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->line = t.line;
        s->text = next().text;
        out.push_back(std::move(s));
      } else if (t.kind == Tok::kVarBegin) {
        ++i_;
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->line = t.line;
        BITNET_ASSIGN_OR_RETURN(s->expr, parse_expression());
        BITNET_RETURN_IF_ERROR(expect(Tok::kVarEnd, "'}}'"));
        out.push_back(std::move(s));
      } else if (t.kind == Tok::kBlockBegin) {
        ++i_;
        BITNET_ASSIGN_OR_RETURN(const std::string name, expect_name());
        if (one_of(name, ends)) {
          ended_by = name;
          return {};
        }
        BITNET_RETURN_IF_ERROR(parse_statement(name, out));
      } else {
        return error("unexpected " + describe(t));
      }
    }
  }

  Status parse_statement(const std::string& name, Body& out) {
    auto s = std::make_unique<Stmt>();
    s->line = peek().line;
    std::string ended_by;
    if (name == "if") {
      s->kind = StmtKind::kIf;
      std::string branch = "if";
      while (branch == "if" || branch == "elif") {
        BITNET_ASSIGN_OR_RETURN(ExprPtr cond, parse_expression());
        BITNET_RETURN_IF_ERROR(expect(Tok::kBlockEnd, "'%}'"));
        Body body;
        BITNET_RETURN_IF_ERROR(parse_body(body, {"elif", "else", "endif"}, branch));
        s->branches.emplace_back(std::move(cond), std::move(body));
      }
      if (branch == "else") {
        BITNET_RETURN_IF_ERROR(expect(Tok::kBlockEnd, "'%}'"));
        BITNET_RETURN_IF_ERROR(parse_body(s->body, {"endif"}, ended_by));
      }
    } else if (name == "for") {
      s->kind = StmtKind::kFor;
      const bool paren = at_op("(");
      if (paren) ++i_;
      BITNET_ASSIGN_OR_RETURN(std::string target, expect_name());
      s->targets.push_back(std::move(target));
      if (at_op(",")) {
        ++i_;
        BITNET_ASSIGN_OR_RETURN(std::string second, expect_name());
        s->targets.push_back(std::move(second));
      }
      if (paren) BITNET_RETURN_IF_ERROR(expect_op(")"));
      if (!at_name("in")) return error("expected 'in' in for");
      ++i_;
      BITNET_ASSIGN_OR_RETURN(s->expr, parse_or());
      if (at_name("if")) {
        ++i_;
        BITNET_ASSIGN_OR_RETURN(s->filter, parse_expression());
      }
      if (at_name("recursive")) return error("recursive loops are not supported");
      BITNET_RETURN_IF_ERROR(expect(Tok::kBlockEnd, "'%}'"));
      ++loop_depth_;
      Status st = parse_body(s->body, {"else", "endfor"}, ended_by);
      --loop_depth_;
      BITNET_RETURN_IF_ERROR(st);
      if (ended_by == "else") {
        BITNET_RETURN_IF_ERROR(expect(Tok::kBlockEnd, "'%}'"));
        BITNET_RETURN_IF_ERROR(parse_body(s->else_body, {"endfor"}, ended_by));
      }
    } else if (name == "set") {
      BITNET_ASSIGN_OR_RETURN(std::string target, expect_name());
      s->targets.push_back(std::move(target));
      if (at_op(".")) {
        ++i_;
        BITNET_ASSIGN_OR_RETURN(std::string attr, expect_name());
        s->targets.push_back(std::move(attr));
      }
      if (at_op("=")) {
        ++i_;
        s->kind = StmtKind::kSet;
        BITNET_ASSIGN_OR_RETURN(s->expr, parse_expression());
      } else if (peek().kind == Tok::kBlockEnd && s->targets.size() == 1) {
        s->kind = StmtKind::kSetBlock;
        ++i_;
        BITNET_RETURN_IF_ERROR(parse_body(s->body, {"endset"}, ended_by));
      } else {
        return error("expected '=' in set");
      }
    } else if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) return error(fmt::format("'{}' outside a loop", name));
      s->kind = name == "break" ? StmtKind::kBreak : StmtKind::kContinue;
    } else if (name == "generation") {  // Hugging Face's marker of assistant text: just its body
      s->kind = StmtKind::kBlock;
      BITNET_RETURN_IF_ERROR(expect(Tok::kBlockEnd, "'%}'"));
      BITNET_RETURN_IF_ERROR(parse_body(s->body, {"endgeneration"}, ended_by));
    } else {
      return error(fmt::format("unsupported tag '{}'", name));
    }
    BITNET_RETURN_IF_ERROR(expect(Tok::kBlockEnd, "'%}'"));
    out.push_back(std::move(s));
    return {};
  }

  ExprPtr make(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  Result<ExprPtr> parse_expression() {
    DepthGuard guard(depth_);
    BITNET_RETURN_IF_ERROR(deeper());
    BITNET_ASSIGN_OR_RETURN(ExprPtr a, parse_or());
    int n_links = 0;
    while (at_name("if")) {
      BITNET_RETURN_IF_ERROR(link(n_links));
      const int line = next().line;
      BITNET_ASSIGN_OR_RETURN(ExprPtr cond, parse_or());
      ExprPtr c = make(ExprKind::kCond, line);
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(a));
      if (at_name("else")) {
        ++i_;
        BITNET_ASSIGN_OR_RETURN(ExprPtr b, parse_expression());
        c->args.push_back(std::move(b));
      }
      a = std::move(c);
    }
    return a;
  }

  Result<ExprPtr> parse_or() {
    BITNET_ASSIGN_OR_RETURN(ExprPtr a, parse_and());
    int n_links = 0;
    while (at_name("or")) {
      BITNET_RETURN_IF_ERROR(link(n_links));
      ExprPtr e = make(ExprKind::kOr, next().line);
      BITNET_ASSIGN_OR_RETURN(ExprPtr b, parse_and());
      e->args.push_back(std::move(a));
      e->args.push_back(std::move(b));
      a = std::move(e);
    }
    return a;
  }

  Result<ExprPtr> parse_and() {
    BITNET_ASSIGN_OR_RETURN(ExprPtr a, parse_not());
    int n_links = 0;
    while (at_name("and")) {
      BITNET_RETURN_IF_ERROR(link(n_links));
      ExprPtr e = make(ExprKind::kAnd, next().line);
      BITNET_ASSIGN_OR_RETURN(ExprPtr b, parse_not());
      e->args.push_back(std::move(a));
      e->args.push_back(std::move(b));
      a = std::move(e);
    }
    return a;
  }

  Result<ExprPtr> parse_not() {
    if (at_name("not")) {
      DepthGuard guard(depth_);
      BITNET_RETURN_IF_ERROR(deeper());
      ExprPtr e = make(ExprKind::kNot, next().line);
      BITNET_ASSIGN_OR_RETURN(ExprPtr x, parse_not());
      e->args.push_back(std::move(x));
      return e;
    }
    return parse_compare();
  }

  Result<ExprPtr> parse_compare() {
    BITNET_ASSIGN_OR_RETURN(ExprPtr a, parse_math1());
    ExprPtr cmp;
    int n_links = 0;
    while (true) {
      std::string op;
      if (peek().kind == Tok::kOp && one_of(peek().text, {"==", "!=", "<", "<=", ">", ">="})) {
        op = next().text;
      } else if (at_name("in")) {
        ++i_;
        op = "in";
      } else if (at_name("not") && at_name("in", 1)) {
        i_ += 2;
        op = "not in";
      } else {
        break;
      }
      BITNET_RETURN_IF_ERROR(link(n_links));
      if (!cmp) {
        cmp = make(ExprKind::kCompare, a->line);
        cmp->args.push_back(std::move(a));
      }
      BITNET_ASSIGN_OR_RETURN(ExprPtr b, parse_math1());
      cmp->ops.push_back(op);
      cmp->args.push_back(std::move(b));
    }
    return cmp ? std::move(cmp) : std::move(a);
  }

  // One level of left-associative binary operators.
  template <typename Next>
  Result<ExprPtr> parse_binary(std::initializer_list<const char*> ops, Next next_level) {
    BITNET_ASSIGN_OR_RETURN(ExprPtr a, (this->*next_level)());
    int n_links = 0;
    while (peek().kind == Tok::kOp && one_of(peek().text, ops)) {
      BITNET_RETURN_IF_ERROR(link(n_links));
      ExprPtr e = make(ExprKind::kBinary, peek().line);
      e->op = next().text;
      BITNET_ASSIGN_OR_RETURN(ExprPtr b, (this->*next_level)());
      e->args.push_back(std::move(a));
      e->args.push_back(std::move(b));
      a = std::move(e);
    }
    return a;
  }
  Result<ExprPtr> parse_math1() { return parse_binary({"+", "-"}, &Parser::parse_concat); }
  Result<ExprPtr> parse_concat() { return parse_binary({"~"}, &Parser::parse_math2); }
  Result<ExprPtr> parse_math2() { return parse_binary({"*", "/", "//", "%"}, &Parser::parse_pow); }
  Result<ExprPtr> parse_pow() { return parse_binary({"**"}, &Parser::parse_unary_filtered); }
  Result<ExprPtr> parse_unary_filtered() { return parse_unary(true); }

  Result<ExprPtr> parse_unary(bool with_filter) {
    DepthGuard guard(depth_);
    BITNET_RETURN_IF_ERROR(deeper());
    ExprPtr node;
    if (at_op("-") || at_op("+")) {
      node = make(ExprKind::kUnary, peek().line);
      node->op = next().text;
      BITNET_ASSIGN_OR_RETURN(ExprPtr x, parse_unary(false));
      node->args.push_back(std::move(x));
    } else {
      BITNET_ASSIGN_OR_RETURN(node, parse_primary());
    }
    BITNET_ASSIGN_OR_RETURN(node, parse_postfix(std::move(node)));
    if (with_filter) {
      BITNET_ASSIGN_OR_RETURN(node, parse_filter_expr(std::move(node)));
    }
    return node;
  }

  Result<ExprPtr> parse_primary() {
    const Token& t = peek();
    switch (t.kind) {
      case Tok::kName: {
        ++i_;
        ExprPtr e = make(ExprKind::kLiteral, t.line);
        if (t.text == "true" || t.text == "True") e->literal = Value::boolean(true);
        else if (t.text == "false" || t.text == "False") e->literal = Value::boolean(false);
        else if (t.text == "none" || t.text == "None") e->literal = Value::none();
        else {
          e->kind = ExprKind::kName;
          e->name = t.text;
        }
        return e;
      }
      case Tok::kString: {
        std::string s = next().text;
        while (peek().kind == Tok::kString) s += next().text;  // adjacent literals concatenate
        ExprPtr e = make(ExprKind::kLiteral, t.line);
        e->literal = Value::string(std::move(s));
        return e;
      }
      case Tok::kInt:
      case Tok::kFloat: {
        ++i_;
        ExprPtr e = make(ExprKind::kLiteral, t.line);
        e->literal = t.kind == Tok::kInt ? Value::integer(t.i) : Value::number(t.f);
        return e;
      }
      case Tok::kOp:
        if (t.text == "(") {
          ++i_;
          ExprPtr list = make(ExprKind::kList, t.line);
          list->tuple = true;
          if (at_op(")")) {
            ++i_;
            return list;
          }
          BITNET_ASSIGN_OR_RETURN(ExprPtr first, parse_expression());
          if (!at_op(",")) {
            BITNET_RETURN_IF_ERROR(expect_op(")"));
            return first;
          }
          list->args.push_back(std::move(first));
          while (at_op(",")) {
            ++i_;
            if (at_op(")")) break;
            BITNET_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
            list->args.push_back(std::move(item));
          }
          BITNET_RETURN_IF_ERROR(expect_op(")"));
          return list;
        }
        if (t.text == "[") {
          ++i_;
          ExprPtr list = make(ExprKind::kList, t.line);
          while (!at_op("]")) {
            BITNET_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
            list->args.push_back(std::move(item));
            if (!at_op(",")) break;
            ++i_;
          }
          BITNET_RETURN_IF_ERROR(expect_op("]"));
          return list;
        }
        if (t.text == "{") {
          ++i_;
          ExprPtr dict = make(ExprKind::kDict, t.line);
          while (!at_op("}")) {
            BITNET_ASSIGN_OR_RETURN(ExprPtr key, parse_expression());
            BITNET_RETURN_IF_ERROR(expect_op(":"));
            BITNET_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
            dict->args.push_back(std::move(key));
            dict->kwargs.emplace_back(std::string(), std::move(value));
            if (!at_op(",")) break;
            ++i_;
          }
          BITNET_RETURN_IF_ERROR(expect_op("}"));
          return dict;
        }
        break;
      default: break;
    }
    return error("unexpected " + describe(t));
  }

  Result<ExprPtr> parse_postfix(ExprPtr node) {
    int n_links = 0;
    while (true) {
      if (at_op(".") || at_op("[") || at_op("(")) BITNET_RETURN_IF_ERROR(link(n_links));
      if (at_op(".")) {
        const int line = next().line;
        ExprPtr e = make(ExprKind::kAttr, line);
        if (peek().kind == Tok::kInt) {  // x.0 is x[0]
          e->kind = ExprKind::kItem;
          ExprPtr index = make(ExprKind::kLiteral, line);
          index->literal = Value::integer(next().i);
          e->args.push_back(std::move(node));
          e->args.push_back(std::move(index));
        } else {
          BITNET_ASSIGN_OR_RETURN(e->name, expect_name());
          e->args.push_back(std::move(node));
        }
        node = std::move(e);
      } else if (at_op("[")) {
        BITNET_ASSIGN_OR_RETURN(node, parse_subscript(std::move(node)));
      } else if (at_op("(")) {
        BITNET_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> parse_subscript(ExprPtr obj) {
    const int line = next().line;  // '['
    ExprPtr parts[3];
    bool given[3] = {false, false, false};
    int n_colons = 0;
    while (true) {
      if (at_op("]")) break;
      if (at_op(":")) {
        if (++n_colons > 2) return error("too many ':' in a slice");
        ++i_;
        continue;
      }
      if (given[n_colons]) return error("expected ']' or ':'");
      BITNET_ASSIGN_OR_RETURN(parts[n_colons], parse_expression());
      given[n_colons] = true;
    }
    ++i_;  // ']'
    ExprPtr e = make(n_colons == 0 ? ExprKind::kItem : ExprKind::kSlice, line);
    e->args.push_back(std::move(obj));
    if (n_colons == 0) {
      if (!given[0]) return error("empty subscript");
      e->args.push_back(std::move(parts[0]));
      return e;
    }
    for (int k = 0; k < 3; ++k) {
      e->has_slice_part[k] = given[k];
      e->args.push_back(given[k] ? std::move(parts[k]) : make(ExprKind::kLiteral, line));
    }
    return e;
  }

  // `(args, name=value)` appended to `e` (args after any already there).
  Status parse_args(Expr& e) {
    BITNET_RETURN_IF_ERROR(expect_op("("));
    while (!at_op(")")) {
      if (peek().kind == Tok::kName && at_op("=", 1)) {
        std::string key = next().text;
        ++i_;
        BITNET_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
        e.kwargs.emplace_back(std::move(key), std::move(value));
      } else {
        if (!e.kwargs.empty()) return error("positional argument after a keyword argument");
        BITNET_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
        e.args.push_back(std::move(value));
      }
      if (!at_op(",")) break;
      ++i_;
    }
    return expect_op(")");
  }

  Result<ExprPtr> parse_call(ExprPtr callee) {
    ExprPtr e = make(ExprKind::kCall, peek().line);
    e->args.push_back(std::move(callee));
    BITNET_RETURN_IF_ERROR(parse_args(*e));
    return e;
  }

  Result<ExprPtr> parse_filter_expr(ExprPtr node) {
    int n_links = 0;
    while (true) {
      if (at_op("|") || at_name("is") || at_op("(")) BITNET_RETURN_IF_ERROR(link(n_links));
      if (at_op("|")) {
        const int line = next().line;
        BITNET_ASSIGN_OR_RETURN(std::string name, expect_name());
        if (std::none_of(std::begin(kFilters), std::end(kFilters), [&](const char* f) { return name == f; })) {
          return error(fmt::format("unknown filter '{}'", name));
        }
        ExprPtr e = make(ExprKind::kFilter, line);
        e->name = std::move(name);
        e->args.push_back(std::move(node));
        if (at_op("(")) BITNET_RETURN_IF_ERROR(parse_args(*e));
        node = std::move(e);
      } else if (at_name("is")) {
        const int line = next().line;
        ExprPtr e = make(ExprKind::kTest, line);
        if (at_name("not")) {
          ++i_;
          e->negate = true;
        }
        BITNET_ASSIGN_OR_RETURN(e->name, expect_name());
        if (std::none_of(std::begin(kTests), std::end(kTests), [&](const char* f) { return e->name == f; })) {
          return error(fmt::format("unknown test '{}'", e->name));
        }
        e->args.push_back(std::move(node));
        if (at_op("(")) {
          BITNET_RETURN_IF_ERROR(parse_args(*e));
        } else if ((peek().kind == Tok::kName && !one_of(peek().text, {"else", "or", "and", "if", "is", "in", "not"})) ||
                   peek().kind == Tok::kString || peek().kind == Tok::kInt || peek().kind == Tok::kFloat ||
                   at_op("[") || at_op("{")) {
          DepthGuard guard(depth_);
          BITNET_RETURN_IF_ERROR(deeper());
          BITNET_ASSIGN_OR_RETURN(ExprPtr arg, parse_primary());
          BITNET_ASSIGN_OR_RETURN(arg, parse_postfix(std::move(arg)));
          e->args.push_back(std::move(arg));
        }
        node = std::move(e);
      } else if (at_op("(")) {
        BITNET_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
      } else {
        return node;
      }
    }
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  int max_depth_;
};

}  // namespace

Result<std::shared_ptr<const Program>> parse(std::string_view source, const TemplateLimits& limits) {
  if (source.size() > limits.max_template_bytes) {
    return out_of_range(fmt::format("chat template: {} bytes, more than the limit of {}", source.size(),
                                    limits.max_template_bytes));
  }
  // Jinja reads "\r\n" and "\r" as "\n" and drops one trailing newline.
  std::string text;
  text.reserve(source.size());
  for (size_t k = 0; k < source.size(); ++k) {
    if (source[k] == '\r') {
      text += '\n';
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else {
      text += source[k];
    }
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  std::vector<Token> tokens;
  BITNET_RETURN_IF_ERROR(Lexer(std::move(text), tokens).run());
  auto program = std::make_shared<Program>();
  BITNET_RETURN_IF_ERROR(Parser(tokens, limits.max_depth).parse_template(program->body));
  return std::shared_ptr<const Program>(std::move(program));
}

namespace {

// Walks what parse() built; its nesting is bounded by TemplateLimits::max_depth.
bool expr_reads(const Expr& e, std::string_view name) {
  if (e.kind == ExprKind::kName && e.name == name) return true;
  for (const ExprPtr& a : e.args)
    if (a && expr_reads(*a, name)) return true;
  for (const auto& [key, value] : e.kwargs)
    if (value && expr_reads(*value, name)) return true;
  return false;
}

bool body_reads(const Body& body, std::string_view name) {
  for (const auto& st : body) {
    if (st->expr && expr_reads(*st->expr, name)) return true;
    if (st->filter && expr_reads(*st->filter, name)) return true;
    for (const auto& [cond, branch] : st->branches) {
      if ((cond && expr_reads(*cond, name)) || body_reads(branch, name)) return true;
    }
    if (body_reads(st->body, name) || body_reads(st->else_body, name)) return true;
  }
  return false;
}

}  // namespace

bool reads_variable(const Program& program, std::string_view name) { return body_reads(program.body, name); }

}  // namespace bitnet::chat::jinja
