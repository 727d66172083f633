// The single-page chat UI served at "/" (embedded in the binary).
#pragma once

#include <string_view>

namespace bitnet::server {

std::string_view web_ui_html();

}  // namespace bitnet::server
