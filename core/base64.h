#pragma once

#include <string>
#include <string_view>

namespace podshaper {

// RFC 4648 base64 with padding (AdmissionReview's response.patch is []byte).
std::string base64Encode(std::string_view data);

}  // namespace podshaper
