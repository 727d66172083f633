// ChatTemplate: parsed Jinja text or a named built-in, rendered over a conversation.
#include <limits>
#include <new>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "bitnet/chat.h"
#include "chat/jinja.h"

namespace bitnet::chat {

namespace {

struct Builtin {
  const char* name;
  const char* source;
};

// The built-ins are the models' own templates (sources in testdata/SOURCES.md).
constexpr Builtin kBuiltins[] = {
    // Meta-Llama-3-8B-Instruct: every turn closed by <|eot_id|>, BOS before the first.
    {"llama3",
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
     "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
     "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
     "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"},
    // microsoft/bitnet-b1.58-2B-4T: "Role: content<|eot_id|>", BOS before the first turn.
    {"bitnet",
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = message['role'] | "
     "capitalize + ': '+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = "
     "bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ 'Assistant: ' }}"
     "{% endif %}"},
    // ChatML (Qwen2, SmolLM2 without their default system prompts).
    {"chatml",
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
     "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"},
    // Llama-2-7b-chat-hf: [INST] turns, the system prompt inside the first one.
    {"llama2",
     "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
     "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
     "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
     "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
     "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
     "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
     "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
     "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"},
    // No special tokens: "role: content" lines, for models without a chat format.
    {"plain",
     "{% for message in messages %}{{ message['role'] + ': ' + message['content'] + '\n' }}{% endfor %}"
     "{% if add_generation_prompt %}{{ 'assistant:' }}{% endif %}"},
};

// A JSON value as the template sees it (Python's json.loads): objects keep their key order.
Result<jinja::Value> from_json(const nlohmann::ordered_json& j, int depth, const TemplateLimits& limits) {
  using jinja::Value;
  if (depth > limits.max_depth) return invalid_argument("chat template: the tools nest too deeply");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      if (j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return Value::number(j.get<double>());
      return Value::integer(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      jinja::List list;
      for (const auto& item : j) {
        BITNET_ASSIGN_OR_RETURN(Value v, from_json(item, depth + 1, limits));
        list.push_back(std::move(v));
      }
      return Value::of_list(std::move(list));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto d = std::make_shared<jinja::Dict>();
      for (const auto& [key, item] : j.items()) {
        BITNET_ASSIGN_OR_RETURN(Value v, from_json(item, depth + 1, limits));
        d->items.emplace_back(key, std::move(v));
      }
      return Value::of_dict(std::move(d));
    }
    default: return invalid_argument("chat template: the tools are not plain JSON");
  }
}

// A JSON array (tools, tool calls) as the template sees it; "" = None.
Result<jinja::Value> json_array_value(const std::string& text, const char* what, const TemplateLimits& limits) {
  if (text.empty()) return jinja::Value::none();
  const auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array()) return invalid_argument(fmt::format("chat template: {} must be a JSON array", what));
  return from_json(j, 0, limits);
}

}  // namespace

std::vector<std::string> builtin_names() {
  std::vector<std::string> names;
  for (const Builtin& b : kBuiltins) names.emplace_back(b.name);
  return names;
}

Result<std::string> builtin_source(std::string_view name) {
  for (const Builtin& b : kBuiltins)
    if (name == b.name) return std::string(b.source);
  return not_found(fmt::format("unknown chat template '{}' (built-ins: {})", name, fmt::join(builtin_names(), ", ")));
}

std::string recognize(std::string_view text) {
  if (text.find("<|start_header_id|>") != std::string_view::npos) return "llama3";
  if (text.find("<|eot_id|>") != std::string_view::npos) return "bitnet";
  if (text.find("<|im_start|>") != std::string_view::npos) return "chatml";
  if (text.find("[INST]") != std::string_view::npos) return "llama2";
  return "";
}

Result<ChatTemplate> ChatTemplate::parse(std::string_view text, const TemplateLimits& limits) {
  ChatTemplate t;
  try {
    BITNET_ASSIGN_OR_RETURN(t.program_, jinja::parse(text, limits));
    t.source_ = std::string(text);
  } catch (const std::bad_alloc&) {
    return out_of_memory("chat template: out of memory while parsing");
  }
  t.name_ = "gguf";
  t.limits_ = limits;
  return t;
}

Result<ChatTemplate> ChatTemplate::builtin(std::string_view name) {
  BITNET_ASSIGN_OR_RETURN(const std::string source, builtin_source(name));
  BITNET_ASSIGN_OR_RETURN(ChatTemplate t, parse(source));
  t.name_ = std::string(name);
  return t;
}

Result<ChatTemplate> ChatTemplate::for_model(std::string_view gguf_template, std::string_view override_name,
                                             std::string_view architecture) {
  if (!override_name.empty()) return builtin(override_name);
  if (gguf_template.empty()) return builtin(architecture.starts_with("bitnet") ? "bitnet" : "chatml");
  Result<ChatTemplate> parsed = parse(gguf_template);
  if (parsed.ok()) return parsed;
  const std::string known = recognize(gguf_template);
  if (known.empty()) return parsed.status().with_context("the model's chat template");
  return builtin(known);
}

Result<std::string> ChatTemplate::render(std::span<const Message> messages, const RenderOptions& options) const {
  using jinja::Value;
  try {
    jinja::List list;
    for (const Message& m : messages) {
      auto d = std::make_shared<jinja::Dict>();
      d->items = {{"role", Value::string(m.role)}, {"content", Value::string(m.content)}};
      // Keys only where the message has them: templates ask `'tool_calls' in message`.
      if (!m.tool_calls_json.empty()) {
        BITNET_ASSIGN_OR_RETURN(Value calls, json_array_value(m.tool_calls_json, "a message's tool calls", limits_));
        d->items.emplace_back("tool_calls", std::move(calls));
      }
      if (!m.tool_call_id.empty()) d->items.emplace_back("tool_call_id", Value::string(m.tool_call_id));
      list.push_back(Value::of_dict(std::move(d)));
    }
    BITNET_ASSIGN_OR_RETURN(Value tools, json_array_value(options.tools_json, "the tools", limits_));
    // The variables Hugging Face's apply_chat_template passes (documents: None).
    const std::vector<std::pair<std::string, Value>> vars = {
        {"messages", Value::of_list(std::move(list))},
        {"add_generation_prompt", Value::boolean(options.add_generation_prompt)},
        {"bos_token", Value::string(options.bos_token)},
        {"eos_token", Value::string(options.eos_token)},
        {"tools", std::move(tools)},
        {"documents", Value::none()},
    };
    return jinja::render(*program_, vars, limits_);
  } catch (const std::bad_alloc&) {
    return out_of_memory("chat template: out of memory while rendering");
  }
}

bool ChatTemplate::uses_tools() const { return jinja::reads_variable(*program_, "tools"); }

}  // namespace bitnet::chat
