#include "chat/fuzz_entry.h"

#include <string_view>
#include <vector>

#include "bitnet/chat.h"
#include "core/check.h"

namespace bitnet::chat {
namespace {

void check_error(const Status& s) {
  BITNET_CHECK(!s.ok());
  BITNET_CHECK(s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kOutOfRange ||
               s.code() == StatusCode::kOutOfMemory || s.code() == StatusCode::kNotFound);
  BITNET_CHECK(s.message().find("chat template") != std::string::npos);
}

}  // namespace

void chat_template_fuzz_one(const uint8_t* data, size_t size) {
  TemplateLimits limits;
  limits.max_template_bytes = 64 << 10;
  limits.max_output_bytes = 64 << 10;
  limits.max_steps = 200000;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<ChatTemplate> t = ChatTemplate::parse(text, limits);
  if (!t.ok()) {
    check_error(t.status());
    return;
  }
  static const std::vector<std::vector<Message>> conversations = {
      {},
      {{"user", "Hi"}},
      {{"system", " S "}, {"user", "é\n"}, {"assistant", "A"}, {"user", "{{ x }}"}},
  };
  for (const auto& messages : conversations) {
    for (const bool gen : {true, false}) {
      Result<std::string> r = t->render(messages, {gen, "<s>", "</s>"});
      if (r.ok()) {
        BITNET_CHECK(r->size() <= limits.max_output_bytes);
      } else {
        check_error(r.status());
      }
    }
  }
}

}  // namespace bitnet::chat
