// The Jinja subset on small templates: syntax, semantics, whitespace control, errors and limits.
// (chat_template_test.cpp compares whole templates with python3-jinja2.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bitnet/chat.h"

namespace bitnet::chat {
namespace {

const std::vector<Message> kConversation = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "  Bye  "}};

Result<std::string> render(std::string_view text, std::vector<Message> messages = kConversation,
                           bool add_generation_prompt = true, const TemplateLimits& limits = {}) {
  BITNET_ASSIGN_OR_RETURN(const ChatTemplate t, ChatTemplate::parse(text, limits));
  return t.render(messages, {.add_generation_prompt = add_generation_prompt, .bos_token = "<s>", .eos_token = "</s>"});
}

std::string ok(std::string_view text) {
  Result<std::string> r = render(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().to_string();
  return r.ok() ? *r : "<error>";
}

std::string fails(std::string_view text, const TemplateLimits& limits = {}) {
  Result<std::string> r = render(text, kConversation, true, limits);
  EXPECT_FALSE(r.ok()) << text.substr(0, 200) << " rendered: " << (r.ok() ? r->substr(0, 200) : "");
  return r.ok() ? "" : r.status().to_string();
}

TEST(Jinja, TextAndExpressions) {
  EXPECT_EQ(ok("plain text"), "plain text");
  EXPECT_EQ(ok("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 3 / 2 }} {{ 2 ** 10 }}"),
            "7 9 3 2 1.5 1024");
  EXPECT_EQ(ok("{{ 'a' + 'b' ~ 1 ~ none ~ true }}"), "ab1NoneTrue");
  EXPECT_EQ(ok("{{ 'x' if false }}|{{ 'y' if true else 'z' }}"), "|y");
  EXPECT_EQ(ok("{{ [1, 'a', none, 2.5] }} {{ {'k': [true]} }}"), "[1, 'a', None, 2.5] {'k': [True]}");
  EXPECT_EQ(ok("{{ 'it\\'s' }} {{ \"a\\tb\" }} {{ 'é\\u00e9' }}"), "it's a\tb éé");
  EXPECT_EQ(ok("{{ messages[1]['content'] }}{{ messages[1].role }}{{ messages[-1].content }}"), "Hiuser  Bye  ");
  EXPECT_EQ(ok("{{ messages[9] is defined }} {{ nothing }}|{{ nothing is undefined }}"), "False |True");
  EXPECT_EQ(ok("{{ 1 < 2 < 3 }} {{ 'b' in 'abc' }} {{ 3 not in [1, 2] }} {{ 1 == 1.0 == true }}"), "True True True True");
  EXPECT_EQ(ok("{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}"), "<s></s>True");
}

TEST(Jinja, FiltersTestsAndMethods) {
  EXPECT_EQ(ok("{{ '  x  ' | trim }}|{{ 'user' | capitalize }}|{{ 'a-b c' | title }}|{{ 'Ab' | upper }}{{ 'Ab' | lower }}"),
            "x|User|A-B C|ABab");
  EXPECT_EQ(ok("{{ messages | length }} {{ 'héllo' | length }} {{ x | default('d') }} {{ '' | default('e', true) }}"),
            "4 5 d e");
  EXPECT_EQ(ok("{{ messages | map(attribute='role') | join(',') }}"), "system,user,assistant,user");
  EXPECT_EQ(ok("{{ messages | selectattr('role', 'equalto', 'user') | list | length }}"), "2");
  EXPECT_EQ(ok("{{ {'a': 1, 'b': [2, 'é']} | tojson }}"), "{\"a\": 1, \"b\": [2, \"é\"]}");
  EXPECT_EQ(ok("{{ [1] | tojson(indent=2) }}"), "[\n  1\n]");
  EXPECT_EQ(ok("{{ ' a b '.strip() }}|{{ 'a,b'.split(',') }}|{{ 'abc'.startswith('ab') }}|{{ 'aXa'.replace('a', 'b') }}"),
            "a b|['a', 'b']|True|bXb");
  EXPECT_EQ(ok("{{ 'abcdef'[1:4] }} {{ 'abc'[::-1] }} {{ [1, 2, 3][1:] }} {{ messages[1:] | length }}"), "bcd cba [2, 3] 3");
  EXPECT_EQ(ok("{{ 4 is even }} {{ 3 is odd }} {{ 'x' is string }} {{ 1 is number }} {{ {} is mapping }} {{ none is none }}"),
            "True True True True True True");
  EXPECT_EQ(ok("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
  EXPECT_EQ(ok("{{ {'a': 1}.get('b', 'none') }}"), "none");
}

TEST(Jinja, LoopsScopesAndNamespaces) {
  EXPECT_EQ(ok("{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }};{% endfor %}"),
            "10TrueFalse;21FalseFalse;32FalseFalse;43FalseTrue;");
  EXPECT_EQ(ok("{% for m in messages if m.role == 'user' %}{{ loop.length }}{{ m.content }}{% endfor %}"), "2Hi2  Bye  ");
  EXPECT_EQ(ok("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(ok("{% for x in range(5) %}{% if x == 3 %}{% break %}{% endif %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}"),
            "02");
  // A `set` inside a loop lives for one iteration; a namespace carries values out.
  EXPECT_EQ(ok("{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}"), "12121");
  EXPECT_EQ(ok("{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"), "6");
  EXPECT_EQ(ok("{% if true %}{% set y = 3 %}{% endif %}{{ y }}"), "3");
  EXPECT_EQ(ok("{% set b %}in{{ 1 }}{% endset %}[{{ b }}]"), "[in1]");
  EXPECT_EQ(ok("{% for m in messages %}{{ loop.previtem is defined }}{% endfor %}"), "FalseTrueTrueTrue");
}

TEST(Jinja, WhitespaceAsHuggingFaceRendersIt) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indentation before it.
  EXPECT_EQ(ok("  {% if true %}\n  x\n  {% endif %}\n  y  {%- if true -%}  z  {% endif %}\n"), "  x\n  yz  ");
  EXPECT_EQ(ok("a\n{# comment #}\nb {{- ' c ' -}} d"), "a\nb c d");
  EXPECT_EQ(ok("line\r\nnext\r\n"), "line\nnext");  // newlines normalized, one trailing dropped
  EXPECT_EQ(ok("  {%+ if true %}x{% endif +%}\ny\n"), "  x\ny");  // `+` keeps what they would strip
}

TEST(Jinja, Errors) {
  EXPECT_NE(fails("{% if true %}x").find("missing 'elif' or 'else' or 'endif'"), std::string::npos);
  EXPECT_NE(fails("a\n{{ 1 + }}").find("line 2"), std::string::npos);
  EXPECT_NE(fails("{{ x | nosuchfilter }}").find("unknown filter 'nosuchfilter'"), std::string::npos);
  EXPECT_NE(fails("{% macro m() %}{% endmacro %}").find("unsupported tag 'macro'"), std::string::npos);
  EXPECT_NE(fails("{{ raise_exception('bad roles') }}").find("bad roles"), std::string::npos);
  EXPECT_NE(fails("{{ 'a' + 1 }}").find("unsupported operand"), std::string::npos);
  EXPECT_NE(fails("{{ undefined_thing.attr }}").find("undefined"), std::string::npos);
  EXPECT_NE(fails("{% break %}").find("outside a loop"), std::string::npos);
  EXPECT_NE(fails("{{ 1 // 0 }}").find("by zero"), std::string::npos);
  EXPECT_NE(fails("{{ 9223372036854775807 + 1 }}").find("overflow"), std::string::npos);
  EXPECT_NE(fails("{{ 'unterminated }}").find("unterminated string"), std::string::npos);
  EXPECT_NE(fails("{% set ns = namespace() %}{% set ns.self = ns %}").find("namespace"), std::string::npos);
}

TEST(Jinja, HostileTemplatesHitLimits) {
  TemplateLimits small;
  small.max_steps = 100000;
  small.max_output_bytes = 1 << 16;
  // Endless work, output, string growth, nesting, recursion in the parser: each a clean error.
  EXPECT_NE(fails("{% for i in range(100000000) %}{% endfor %}", small).find("evaluation steps"), std::string::npos);
  EXPECT_NE(fails("{% for i in range(5000) %}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx{% endfor %}", small)
                .find("output larger"),
            std::string::npos);
  EXPECT_NE(fails("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", small)
                .find("string of more than"),
            std::string::npos);
  EXPECT_NE(fails("{{ 'x' * 100000000 }}", small).find("too large"), std::string::npos);
  EXPECT_NE(fails("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").find("nested"), std::string::npos);
  std::string chain = "{{ 1";
  for (int i = 0; i < 20000; ++i) chain += " + 1";
  EXPECT_NE(fails(chain + " }}").find("nested"), std::string::npos);
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += "{% if true %}";
  EXPECT_NE(fails(deep).find("nested"), std::string::npos);
  EXPECT_NE(fails("{% set ns = namespace(l=[]) %}{% for i in range(200) %}{% set ns.l = [ns.l] %}{% endfor %}")
                .find("nested too deeply"),
            std::string::npos);
  TemplateLimits tiny;
  tiny.max_template_bytes = 10;
  EXPECT_FALSE(ChatTemplate::parse("{{ 'more than ten bytes' }}", tiny).ok());
}

TEST(ChatTemplate, BuiltinsAndRecognition) {
  EXPECT_EQ(builtin_names(), (std::vector<std::string>{"llama3", "bitnet", "chatml", "llama2", "plain"}));
  for (const std::string& name : builtin_names()) {
    auto t = ChatTemplate::builtin(name);
    ASSERT_TRUE(t.ok()) << name << ": " << t.status().to_string();
    EXPECT_EQ(t->name(), name);
    EXPECT_EQ(recognize(t->source()), name == "plain" ? "" : name) << name;
  }
  EXPECT_EQ(ChatTemplate::builtin("nope").status().code(), StatusCode::kNotFound);
  const std::vector<Message> convo = {{"system", "S"}, {"user", "Q"}};
  const RenderOptions opts{.add_generation_prompt = true, .bos_token = "<|begin_of_text|>", .eos_token = "<|eot_id|>"};
  EXPECT_EQ(*ChatTemplate::builtin("bitnet")->render(convo, opts),
            "<|begin_of_text|>System: S<|eot_id|>User: Q<|eot_id|>Assistant: ");
  EXPECT_EQ(*ChatTemplate::builtin("llama3")->render(convo, opts),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nQ<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(*ChatTemplate::builtin("chatml")->render(convo, opts),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(*ChatTemplate::builtin("plain")->render(convo, opts), "system: S\nuser: Q\nassistant:");
  EXPECT_EQ(*ChatTemplate::builtin("llama2")->render(convo, {.bos_token = "<s>", .eos_token = "</s>"}),
            "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nQ [/INST]");

  // for_model: an override wins; no template -> chatml (bitnet architectures: bitnet); a
  // template the subset cannot parse -> the built-in it looks like.
  EXPECT_EQ(ChatTemplate::for_model("{{ x }}", "llama2", "llama")->name(), "llama2");
  EXPECT_EQ(ChatTemplate::for_model("", "", "llama")->name(), "chatml");
  EXPECT_EQ(ChatTemplate::for_model("", "", "bitnet-b1.58")->name(), "bitnet");
  EXPECT_EQ(ChatTemplate::for_model("{{ x }}", "", "llama")->name(), "gguf");
  EXPECT_EQ(ChatTemplate::for_model("{% macro m() %}<|im_start|>{% endmacro %}", "", "llama")->name(), "chatml");
  EXPECT_FALSE(ChatTemplate::for_model("{% macro m() %}{% endmacro %}", "", "llama").ok());
  EXPECT_FALSE(ChatTemplate::for_model("", "nope", "llama").ok());
}

}  // namespace
}  // namespace bitnet::chat
