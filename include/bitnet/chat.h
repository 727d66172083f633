// Chat templates: a conversation (role, content messages) rendered into the prompt text a chat
// model was trained on, from the Jinja template a GGUF file carries (`tokenizer.chat_template`)
// or a named built-in.
//
//   auto tmpl = bitnet::chat::ChatTemplate::parse(engine->chat_template());
//   auto text = tmpl->render(messages, {.bos_token = "<s>", .eos_token = "</s>"});
//
// The renderer is a bounded subset of Jinja2 as Hugging Face's apply_chat_template runs it
// (trim_blocks, lstrip_blocks, loop controls, raise_exception, tojson): templates are untrusted
// input, so every size, nesting depth and amount of work is limited and every failure is a
// Status, never a crash or a hang. See docs/design.md for the subset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bitnet/status.h"

namespace bitnet::chat {

struct Message {
  std::string role;     // "system" | "user" | "assistant" | "tool" (templates may accept others)
  std::string content;
  // An assistant turn's tool calls as a JSON array in OpenAI's shape, [{"id", "type":
  // "function", "function": {"name", "arguments"}}], but with `arguments` an object (as Hugging
  // Face's templates read them: `tool_call.arguments | tojson`); "" = none (the template sees no
  // `tool_calls` key).
  std::string tool_calls_json{};
  std::string tool_call_id{};  // a tool turn: the call it answers ("" = no `tool_call_id` key)
};

struct TemplateLimits {
  size_t max_template_bytes = size_t{1} << 20;
  size_t max_output_bytes = size_t{4} << 20;  // also bounds every string made while rendering
  int max_depth = 64;                         // nesting of blocks and of expressions
  uint64_t max_steps = 5'000'000;             // evaluation steps (nodes, iterations, 64-byte string chunks)
};

struct RenderOptions {
  bool add_generation_prompt = true;  // end with the assistant's turn opened
  std::string bos_token;              // the vocabulary's BOS text, e.g. "<|begin_of_text|>"
  std::string eos_token;
  // The tools the template's `tools` variable lists: a JSON array as OpenAI's chat API takes
  // it ([{"type": "function", "function": {...}}, ...]), keys in their order; "" = none (the
  // template sees None). A template that never reads `tools` ignores them: ask uses_tools().
  std::string tools_json{};
};

namespace jinja {
struct Program;
}

// A parsed template; render() may be called any number of times, from several threads.
class ChatTemplate {
 public:
  // Parses Jinja template text (errors name the line).
  static Result<ChatTemplate> parse(std::string_view text, const TemplateLimits& limits = {});
  // A built-in by name (see builtin_names()).
  static Result<ChatTemplate> builtin(std::string_view name);

  // The template a model uses: `override_name` (a built-in) when not empty, else the GGUF's
  // template text; when that text is empty, "chatml" as llama.cpp does (bitnet architectures:
  // "bitnet"); when it does not parse, the built-in it is recognised as (recognize()) or the
  // parse error.
  static Result<ChatTemplate> for_model(std::string_view gguf_template, std::string_view override_name,
                                        std::string_view architecture);

  Result<std::string> render(std::span<const Message> messages, const RenderOptions& options) const;

  // Whether the template reads the `tools` variable anywhere (tool definitions are rendered
  // only by templates that do).
  bool uses_tools() const;

  // "llama3", "chatml", ... for a built-in or a recognised template; "gguf" for template text.
  const std::string& name() const { return name_; }
  // The Jinja source.
  const std::string& source() const { return source_; }

 private:
  ChatTemplate() = default;
  std::string name_;
  std::string source_;
  TemplateLimits limits_;
  std::shared_ptr<const jinja::Program> program_;
};

// The built-ins: llama3, bitnet (BitNet b1.58 2B-4T), chatml, llama2, plain.
std::vector<std::string> builtin_names();
// The Jinja source of a built-in, or kNotFound listing the names.
Result<std::string> builtin_source(std::string_view name);
// The built-in a template's text looks like (by its markers), or "" when none.
std::string recognize(std::string_view template_text);

}  // namespace bitnet::chat
