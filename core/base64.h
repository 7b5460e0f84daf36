#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace podshaper {

// RFC 4648 base64 with padding (AdmissionReview's response.patch is []byte).
std::string base64Encode(std::string_view data);
// Strict decoding: padding required, no whitespace; nullopt on anything else.
std::optional<std::string> base64Decode(std::string_view text);

}  // namespace podshaper
