#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace podshaper {

// RFC 4648 base64 with padding (AdmissionReview's response.patch is []byte).
std::string base64Encode(std::string_view data);
// Decoding as kubeconfig and AdmissionReview data need it: whitespace is
// skipped and padding is optional; the error says where the input went wrong.
Result<std::string> base64Decode(std::string_view text);

}  // namespace podshaper
