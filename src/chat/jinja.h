// The Jinja subset: a template is lexed and parsed once into a Program (a tree of statements
// and expressions) and rendered against variables. Whitespace follows Jinja2 with
// trim_blocks and lstrip_blocks (as Hugging Face's apply_chat_template sets them), `-`
// modifiers, one trailing newline of the source dropped and newlines normalized to "\n".
//
// Statements: if/elif/else, for (one or two targets, `if` filter, else, loop.*), set (name,
// namespace attribute, block), break/continue, generation (rendered as its body), comments.
// Expressions: literals (str, int, float, bool, none, list, dict), names, .attr, [index],
// [a:b:c], calls, filters, `is` tests, unary/binary arithmetic, ~, comparisons, in, not in,
// and/or/not, `a if c else b`. Everything else is a parse error naming the line.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bitnet/chat.h"
#include "bitnet/status.h"
#include "chat/jinja_value.h"

namespace bitnet::chat::jinja {

enum class ExprKind {
  kLiteral, kName, kAttr, kItem, kSlice, kCall, kFilter, kTest, kUnary, kBinary,
  kAnd, kOr, kNot, kCompare, kCond, kList, kDict,
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  int line = 0;
  Value literal;                     // kLiteral
  std::string name;                  // kName; kAttr: the attribute; kFilter, kTest: the filter or test
  std::string op;                    // kUnary, kBinary: "+", "-", "*", "/", "//", "%", "**", "~"
  std::vector<ExprPtr> args;         // operands: kAttr/kItem/kFilter/kTest/kCall: args[0] is the object/callee
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // kCall/kFilter keyword arguments; kDict entries (key exprs in args)
  std::vector<std::string> ops;      // kCompare: ops[k] between args[k] and args[k+1]
  bool negate = false;               // kTest: `is not`
  bool tuple = false;                // kList: written as a tuple
  bool has_slice_part[3] = {false, false, false};  // kSlice: which of args[1..3] are given
};

enum class StmtKind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kBreak, kContinue, kBlock };

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 0;
  std::string text;                        // kText
  ExprPtr expr;                            // kOutput, kSet value, kFor iterable
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: (condition, body) for if and each elif
  Body body;                               // kFor, kSetBlock, kBlock; kIf: else
  Body else_body;                          // kFor
  std::vector<std::string> targets;        // kFor: 1 or 2 names; kSet/kSetBlock: name, or namespace and attribute
  ExprPtr filter;                          // kFor: `for x in xs if cond`
};

struct Program {
  Body body;
};

Result<std::shared_ptr<const Program>> parse(std::string_view source, const TemplateLimits& limits);

// Whether the program reads a variable called `name` anywhere (a name expression).
bool reads_variable(const Program& program, std::string_view name);

// Renders with `vars` as the template's global variables (raise_exception, namespace and
// range are always there).
Result<std::string> render(const Program& program, const std::vector<std::pair<std::string, Value>>& vars,
                           const TemplateLimits& limits);

}  // namespace bitnet::chat::jinja
