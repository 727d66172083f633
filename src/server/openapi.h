// The OpenAPI 3.0 description of the server's endpoints (openapi.json beside this file,
// embedded in the binary), served at GET /openapi.json.
#pragma once

#include <string_view>

namespace bitnet::server {

std::string_view openapi_json();

}  // namespace bitnet::server
