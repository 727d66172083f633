// Templates rendered by bitnet and by Debian's python3-jinja2, set up as Hugging Face's
// apply_chat_template sets it up (testdata/render_reference.py), over several conversations:
// the texts must agree byte for byte, and where Jinja2 fails bitnet must fail too. The real
// templates are the models' own (testdata/SOURCES.md), SmolLM2's read from its GGUF file in
// ../shared; the feature templates exercise the subset piece by piece. Without python3-jinja2
// the tests report themselves skipped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bitnet/chat.h"
#include "gguf/gguf.h"

namespace bitnet::chat {
namespace {

namespace fs = std::filesystem;

const fs::path kTestdata = BITNET_CHAT_TESTDATA;
const fs::path kShared = BITNET_SHARED_DIR;
constexpr const char* kPython = "/usr/bin/python3";  // Debian's, where python3-jinja2 installs

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool have_jinja2() {
  return std::system((std::string(kPython) + " -c 'import jinja2' >/dev/null 2>&1").c_str()) == 0;
}

#define SKIP_WITHOUT_JINJA2()                                                                          \
  if (!have_jinja2()) GTEST_SKIP() << kPython << " cannot import jinja2: install Debian's python3-jinja2 " \
                                                 "(apt-get install python3-jinja2) to compare with it"

const std::vector<std::vector<Message>>& conversations() {
  static const std::vector<std::vector<Message>> c = {
      {{"user", "What is the capital of France?"}},
      {{"system", "You are a helpful AI assistant named SmolLM, trained by Hugging Face"},
       {"user", "What is the capital of France? Answer in one sentence."}},
      {{"system", "Be brief."}, {"user", "Hello"}, {"assistant", "Hi there! How can I help?"}, {"user", "  Tell me a joke.\n"}},
      {{"user", "Line one\nLine two\n\n"},
       {"assistant", "   padded   "},
       {"user", "unicode: é 日本語 🙂 \"quotes\" 'single' \\backslash {{ not a tag }} {% raw %}\t"}},
      {{"user", ""}, {"assistant", ""}, {"user", "x"}},
      {{"assistant", "I speak first."}, {"user", "Fine."}},
      {{"user", "Call the tool."}, {"tool", "{\"temperature\": 21}"}, {"tool", "second result"}, {"user", "Thanks"}},
      {},
  };
  return c;
}

struct Case {
  std::string label;
  std::string source;
  std::vector<Message> messages;
  bool add_generation_prompt = true;
  std::string tools_json{};  // "" = none
};

// Every template over every conversation, with and without the generation prompt.
std::vector<Case> cases_for(const std::string& label, const std::string& source) {
  std::vector<Case> out;
  for (size_t c = 0; c < conversations().size(); ++c)
    for (const bool gen : {true, false}) out.push_back({label + " conversation " + std::to_string(c) + (gen ? " +gen" : ""), source, conversations()[c], gen});
  return out;
}

constexpr const char* kBos = "<|begin_of_text|>";
constexpr const char* kEos = "<|eot_id|>";

// Renders every case with python3-jinja2 in one process.
nlohmann::json reference(const std::vector<Case>& cases) {
  nlohmann::ordered_json in = nlohmann::ordered_json::array();
  for (const Case& c : cases) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    for (const Message& m : c.messages) {
      messages.push_back({{"role", m.role}, {"content", m.content}});
      if (!m.tool_calls_json.empty()) messages.back()["tool_calls"] = nlohmann::ordered_json::parse(m.tool_calls_json);
      if (!m.tool_call_id.empty()) messages.back()["tool_call_id"] = m.tool_call_id;
    }
    in.push_back({{"template", c.source}, {"messages", messages}, {"add_generation_prompt", c.add_generation_prompt},
                  {"bos_token", kBos}, {"eos_token", kEos}});
    if (!c.tools_json.empty()) in.back()["tools"] = nlohmann::ordered_json::parse(c.tools_json);
  }
  const fs::path dir = fs::temp_directory_path() / ("bitnet_chat_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "in.json", std::ios::binary) << in.dump();
  const std::string cmd = std::string(kPython) + " " + (kTestdata / "render_reference.py").string() + " " +
                          (dir / "in.json").string() + " " + (dir / "out.json").string();
  const int status = std::system(cmd.c_str());
  EXPECT_EQ(status, 0) << cmd;
  nlohmann::json out = nlohmann::json::parse(slurp(dir / "out.json"), nullptr, false);
  fs::remove_all(dir);
  return out;
}

void expect_same_as_jinja2(const std::vector<Case>& cases) {
  const nlohmann::json ref = reference(cases);
  ASSERT_TRUE(ref.is_array() && ref.size() == cases.size()) << "no usable output from render_reference.py";
  int n_rendered = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    Result<ChatTemplate> t = ChatTemplate::parse(c.source);
    Result<std::string> got = t.ok() ? t->render(c.messages, {c.add_generation_prompt, kBos, kEos, c.tools_json})
                                     : Result<std::string>(t.status());
    if (ref[k]["ok"].get<bool>()) {
      ASSERT_TRUE(got.ok()) << c.label << ": jinja2 rendered it, bitnet failed: " << got.status().to_string()
                            << "\ntemplate: " << c.source;
      EXPECT_EQ(*got, ref[k]["text"].get<std::string>()) << c.label << "\ntemplate: " << c.source;
      ++n_rendered;
    } else {
      EXPECT_FALSE(got.ok()) << c.label << ": jinja2 failed (" << ref[k]["error"].get<std::string>()
                             << ") but bitnet rendered: " << (got.ok() ? *got : "") << "\ntemplate: " << c.source;
    }
  }
  EXPECT_GT(n_rendered, 0);
}

TEST(ChatTemplateReference, ModelTemplatesMatchJinja2) {
  SKIP_WITHOUT_JINJA2();
  std::vector<Case> cases;
  for (const char* file : {"llama3-instruct.jinja", "bitnet-b1.58-2B-4T.jinja", "qwen2-instruct.jinja",
                           "qwen2.5-instruct.jinja", "llama2-chat.jinja", "llama3.2-instruct.jinja"}) {
    const std::string source = slurp(kTestdata / file);
    ASSERT_FALSE(source.empty()) << file;
    for (Case& c : cases_for(file, source)) cases.push_back(std::move(c));
  }
  for (const std::string& name : builtin_names()) {
    for (Case& c : cases_for("built-in " + name, *builtin_source(name))) cases.push_back(std::move(c));
  }
  expect_same_as_jinja2(cases);
}

TEST(ChatTemplateReference, SharedModelTemplatesMatchJinja2) {
  SKIP_WITHOUT_JINJA2();
  std::vector<Case> cases;
  const fs::path smollm = kShared / "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (fs::exists(smollm)) {
    auto file = gguf::File::open(smollm.string());
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    auto tmpl = file->get_string("tokenizer.chat_template");
    ASSERT_TRUE(tmpl.ok() && tmpl->has_value());
    for (Case& c : cases_for("SmolLM2 GGUF", std::string(**tmpl))) cases.push_back(std::move(c));
  }
  const fs::path llama3 = kShared / "models/llama3-tokenizer/tokenizer_config.json";
  if (fs::exists(llama3)) {
    const nlohmann::json config = nlohmann::json::parse(slurp(llama3));
    for (Case& c : cases_for("llama3-tokenizer", config.at("chat_template").get<std::string>())) cases.push_back(std::move(c));
  }
  if (cases.empty()) GTEST_SKIP() << "no model templates in " << kShared / "models";
  expect_same_as_jinja2(cases);
}

// Small templates that each exercise part of the subset (whitespace control, filters, tests,
// methods, loops, scoping, numbers, escapes, errors).
const char* const kFeatureTemplates[] = {
    R"({{ messages | length }}{% for m in messages %}
  {{ loop.index }}: {{ m.role | upper }} {{ m['content'] | trim | length }}
{% endfor %})",
    R"({%- for m in messages -%}
  [{{- m.role -}}]
{%- endfor -%}
)",
    R"({% for m in messages %}{% if m.role == 'user' %}U{% elif m.role == 'assistant' %}A{% else %}S{% endif %}{% endfor %})",
    R"({% set ns = namespace(sys='', n=0) %}{% for m in messages %}{% if m.role == 'system' %}{% set ns.sys = m.content %}{% else %}{% set ns.n = ns.n + 1 %}{% endif %}{% endfor %}{{ ns.sys ~ '|' ~ ns.n }})",
    R"({{ messages | map(attribute='content') | join(' / ') }})",
    R"({{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list | tojson }})",
    R"({{ messages | tojson }}
{{ messages[-1:] | tojson(indent=2) }})",
    R"({% for m in messages[::-1] %}{{ m.content[:3] }}{{ m.content[-2:] }}|{% endfor %})",
    R"({% for m in messages %}{{ m.content.strip().split() | length }} {{ m.content.startswith('L') }} {{ m.content.replace('e', 'E') }} {{ m.content.lower() }} {{ m.content.upper() }} {{ m.content.title() }} {{ m.content.rstrip() }}|{{ m.content.lstrip() }}
{% endfor %})",
    R"({{ 'x' if messages else 'empty' }} {{ messages[0].role if messages }} {{ (messages | first).role | default('none') }} {{ (messages | last).content | default('none') }})",
    R"({% if messages[0] is defined and messages[0].role == 'system' %}{{ messages[0].content | capitalize }}{% endif %}{{ add_generation_prompt }}{{ bos_token | length }})",
    "   {% for m in messages %}\n      {{ m.role }}\n   {% endfor %}\nend\n",
    "{# comment #}\n{%- if add_generation_prompt %}\n    gen\n{% endif %}\n  {{ eos_token }}  \n",
    "\t{% if true %}\n\t  a {{- ' b ' }}\n\t{%- endif %}  \n{{ 'c' -}}   \n\n  d\n",
    R"({% for m in messages %}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.length }}{% if not loop.last %},{% endif %}{% endfor %})",
    R"({% for i in range(3) %}{{ i }}{% endfor %}{{ range(2, 10, 3) | list }} {{ [3, 1, 2] | reverse | list }} {{ 'abc' | reverse }} {{ -3 | abs }} {{ '42' | int + 1 }} {{ 2.5 | int }} {{ '1.5' | float }})",
    R"({{ 10 / 4 }} {{ 10 // 4 }} {{ -10 // 4 }} {{ 10 % -3 }} {{ 2 ** 0.5 }} {{ 1e3 }} {{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ 1.0 }} {{ 100000000000000000.0 }} {{ 1.5e-7 }} {{ 2 ** 62 }} {{ 7.0 // 2 }} {{ -7.5 % 2 }})",
    R"({{ 'a' < 'b' }} {{ [1, 2] == [1, 2] }} {{ {'a': 1} == {'a': 1} }} {{ none == none }} {{ 1 != 2 }} {{ 'ab' in ['ab'] }} {{ 'k' in {'k': 1} }} {{ not messages }} {{ 1 < 2 < 1 }})",
    R"({{ "double \"quoted\"" }} {{ 'tab\there' }} {{ 'uni\u00e9\U0001F642' }} {{ 'x\\y' }} {{ "it's" | tojson }} {{ ["it's", 'say "hi"', 'both \' "'] }} {{ 'a\nb' }})",
    R"({% set x = messages | length %}{% if x > 2 %}many{% elif x > 0 %}few{% else %}none{% endif %})",
    R"({% for m in messages %}{% if loop.index0 % 2 == 0 %}{{ m.role }}{% else %}{{ m.content | length }}{% endif %}{% if loop.last %}.{% endif %}{% endfor %})",
    R"({{ messages | selectattr('role', 'eq', 'assistant') | list | length }}{{ messages | rejectattr('role', 'equalto', 'system') | list | length }}{{ [0, 1, '', 'a'] | select | list }})",
    R"({% set d = {'b': 2, 'a': [1, {'c': none}]} %}{{ d | tojson }} {{ d.a[1].c }} {{ d['b'] }} {{ d.items() | list }} {{ d | length }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.get('zz', 5) }})",
    R"({% for k, v in {'x': 1, 'y': 2} | items %}{{ k }}{{ v }}{% endfor %} {% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %})",
    "{% set s %}\n  captured {{ messages | length }}\n{% endset %}[{{ s }}]",
    R"({{ 'hello world-wide (x)' | title }} {{ 'HELLO' | capitalize }} {{ '  pad  ' | trim }}| {{ 'xxhixx' | trim('x') }} {{ 'a\nb' | indent(2) }} {{ 'a\nb' | indent(2, true) }} {{ 'a\n\nb' | indent }})",
    R"({{ messages[0]['content'] | default('no content') if messages | length > 0 else 'no messages' }})",
    R"({% for m in messages %}{% for c in m.role %}{% if c == 's' %}{% continue %}{% endif %}{{ c }}{% if c == 'a' %}{% break %}{% endif %}{% endfor %}|{% endfor %})",
    R"({{ messages[5] }}|{{ messages[5] is defined }}|{{ messages[5] | default('d') }}|{{ undefined_var | length }}|{{ none | string }}|{{ true | string }}|{{ undefined_var }}|{{ none }})",
    R"({% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{{ messages | length }})",
    R"({{ messages[0].content + 1 }})",
    R"({{ ''.join(['a', 'b']) }}{{ ', '.join(messages | map(attribute='role')) }})",
    R"({{ 'a,b,,c'.split(',') }} {{ 'a b  c'.split() }} {{ 'a-b-c'.split('-', 1) }} {{ 'hello'.find('l') }} {{ 'hello'.count('l') }} {{ 'x'.endswith(('y', 'x')) }})",
    R"({{ '%s' }} {{ '{{ not }}' }} {{ '{% raw %}' }} {{ 'a' 'b' }})",
    R"({% for m in messages if m.content %}{{ loop.index }}/{{ loop.length }}{% else %}none{% endfor %})",
    R"({% set msgs = messages[1:] if messages and messages[0].role == 'system' else messages %}{{ msgs | length }}{% for m in msgs %}{{ m.role[0] }}{% endfor %})",
    R"({{ messages[0].content is string }} {{ 3 is divisibleby 3 }} {{ messages is iterable }} {{ messages is sequence }} {{ 1.5 is float }} {{ true is boolean }} {{ 1 is integer }} {{ 'A' is upper }} {{ 'a' is lower }} {{ x is none }})",
    R"({{ 'x' ~ messages | length ~ 'y' }} {{ 1 + 2 ~ 3 }} {{ 'a' * 3 }} {{ [1] * 2 }} {{ [1] + [2] }} {{ -(2 ** 2) }} {{ not true or true }} {{ none or 'd' }} {{ 0 and 1 }})",
    R"({{ messages[0] }})",
    R"({{ messages.0.role if messages }})",
    R"({{ undefined_var.attr }})",
    R"({% for x in none %}{% endfor %})",
    "{{ 'unterminated }}",
    R"({% for m in messages %}{% set ns = namespace(c=m.content) %}{{ ns.c | length }}{% endfor %})",
    R"({%- generation -%} in generation {{ messages | length }} {%- endgeneration -%})",
    R"({{ '\x41\101\u00e9' }} {{ 'é'[0] }} {{ 'é日本' | length }} {{ 'é日本'[1:] }} {{ 'é日本' | list }})",
    R"({% for m in messages %}{{ loop.previtem.role if loop.previtem is defined }}>{{ loop.nextitem.role if loop.nextitem is defined }} {% endfor %}{{ '<a & "b">' | e }} {{ messages | count }} {{ 'x' | safe }} {{ messages | first | default('-') is mapping }})",
    R"({{ 'ab' | replace('', '-') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 'x'.replace('x', 'yy', 0) }} {{ 'a b'.split(' ') }})",
};

TEST(ChatTemplateReference, FeatureTemplatesMatchJinja2) {
  SKIP_WITHOUT_JINJA2();
  std::vector<Case> cases;
  for (size_t k = 0; k < std::size(kFeatureTemplates); ++k) {
    for (Case& c : cases_for("feature template " + std::to_string(k), kFeatureTemplates[k])) cases.push_back(std::move(c));
  }
  expect_same_as_jinja2(cases);
}

// OpenAI-style tool definitions, keys in an order no sorting gives back.
constexpr const char* kTools = R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
  "required": ["city"]}, "strict": true}}, {"type": "function", "function": {"name": "noop", "parameters": {"n": 1.5, "z": null}}}])";

TEST(ChatTemplateReference, ToolsReachTheTemplateAsJinja2SeesThem) {
  SKIP_WITHOUT_JINJA2();
  std::vector<Case> cases;
  const std::vector<std::string> sources = {
      slurp(kTestdata / "qwen2.5-instruct.jinja"),
      R"({% if tools %}{% for t in tools %}{{ t.function.name }}({{ t.function.parameters | tojson }}) {{ t | tojson }}
{% endfor %}{% else %}no tools{% endif %}{{ tools | length if tools is not none else 'none' }})"};
  for (const std::string& source : sources) {
    for (Case& c : cases_for("with tools", source)) {
      c.tools_json = kTools;
      cases.push_back(std::move(c));
    }
    for (Case& c : cases_for("empty tools", source)) {
      c.tools_json = "[]";
      cases.push_back(std::move(c));
    }
  }
  expect_same_as_jinja2(cases);
}

// A conversation with a tool call and its result, as the server passes it (arguments an
// object, keys in the order sent): the models' templates render it as Jinja2 does.
TEST(ChatTemplateReference, ToolCallsAndResultsReachTheTemplateAsJinja2SeesThem) {
  SKIP_WITHOUT_JINJA2();
  Message call{"assistant", ""};
  call.tool_calls_json = R"([{"id": "call_1", "type": "function", "function": {"name": "get_weather",
    "arguments": {"city": "Paris", "days": 2, "units": null}}}])";
  Message result{"tool", R"({"temperature": 21})"};
  result.tool_call_id = "call_1";
  Message two_calls{"assistant", "Checking both."};
  two_calls.tool_calls_json = R"([{"id": "a", "type": "function", "function": {"name": "noop", "arguments": {}}},
    {"id": "b", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "\"Zürich\""}}}])";
  const std::vector<std::vector<Message>> conversations = {
      {{"user", "Weather in Paris?"}, call, result},
      {{"system", "Be brief."}, {"user", "Weather in Paris?"}, call, result, {"assistant", "21 degrees."}, {"user", "Thanks"}},
      {{"user", "Both?"}, two_calls, result},
  };
  std::vector<Case> cases;
  for (const char* file : {"llama3.2-instruct.jinja", "qwen2.5-instruct.jinja"}) {
    const std::string source = slurp(kTestdata / file);
    for (size_t k = 0; k < conversations.size(); ++k) {
      for (const bool gen : {true, false}) {
        cases.push_back({std::string(file) + " tool conversation " + std::to_string(k), source, conversations[k], gen, kTools});
      }
    }
  }
  expect_same_as_jinja2(cases);
}

TEST(ChatTemplate, UsesToolsWhenItReadsTheVariable) {
  const auto qwen = ChatTemplate::parse(slurp(kTestdata / "qwen2.5-instruct.jinja"));
  ASSERT_TRUE(qwen.ok());
  EXPECT_TRUE(qwen->uses_tools());
  for (const std::string& name : builtin_names()) EXPECT_FALSE(ChatTemplate::builtin(name)->uses_tools()) << name;
  EXPECT_TRUE(ChatTemplate::parse("{% for m in messages %}{% if loop.first %}{{ tools | tojson }}{% endif %}{% endfor %}")->uses_tools());
  EXPECT_FALSE(ChatTemplate::parse("{{ 'tools' }}{% set tool = 1 %}{{ messages | length }}")->uses_tools());
  // Tools that are not a JSON array are an error, not a crash.
  const std::vector<Message> m = {{"user", "hi"}};
  EXPECT_FALSE(qwen->render(m, {true, "", "", "{\"type\": \"function\"}"}).ok());
  EXPECT_FALSE(qwen->render(m, {true, "", "", "[not json"}).ok());
  EXPECT_EQ(*qwen->render(m, {true, "", "", ""}), *qwen->render(m, {true, "", "", "[]"}));  // [] is falsy
}

TEST(ChatTemplateReference, BuiltinsAreTheModelsTemplates) {
  EXPECT_EQ(*builtin_source("llama3"), slurp(kTestdata / "llama3-instruct.jinja"));
  EXPECT_EQ(*builtin_source("bitnet"), slurp(kTestdata / "bitnet-b1.58-2B-4T.jinja"));
  EXPECT_EQ(*builtin_source("llama2"), slurp(kTestdata / "llama2-chat.jinja"));
}

}  // namespace
}  // namespace bitnet::chat
