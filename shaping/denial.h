#pragma once

#include <array>
#include <string>
#include <string_view>

#include "base/result.h"

namespace podshaper {

// Why a pod was denied, in a word: the step of shapePod that refused it (the metric
// podshaper_admission_denials_total{cause}; docs/webhook.md "Metrics").
enum class DenialCause {
  kNone,  // allowed
  kNotAPod,
  kLimits,
  kClaims,
  kInput,
  kNodeSize,
  kPodSecurity,
  kShmSize,
  kShmCap,
  kVolumeName,
  kContainer,
  kPlacement,
  kNvlinkChannel,
  kUnreadable,
};

// The metric's label values; "" for kNone.
constexpr std::string_view toString(DenialCause cause) {
  switch (cause) {
    case DenialCause::kNone: return "";
    case DenialCause::kNotAPod: return "not-a-pod";
    case DenialCause::kLimits: return "limits";
    case DenialCause::kClaims: return "claims";
    case DenialCause::kInput: return "input";
    case DenialCause::kNodeSize: return "node-size";
    case DenialCause::kPodSecurity: return "pod-security";
    case DenialCause::kShmSize: return "shm-size";
    case DenialCause::kShmCap: return "shm-cap";
    case DenialCause::kVolumeName: return "volume-name";
    case DenialCause::kContainer: return "container";
    case DenialCause::kPlacement: return "placement";
    case DenialCause::kNvlinkChannel: return "nvlink-channel";
    case DenialCause::kUnreadable: return "unreadable";
  }
  return "";
}

// Every cause a denial can carry: the webhook counts each from 0.
inline constexpr std::array kDenialCauses = {
    DenialCause::kNotAPod,     DenialCause::kLimits,    DenialCause::kClaims,      DenialCause::kInput,
    DenialCause::kNodeSize,    DenialCause::kPodSecurity, DenialCause::kShmSize,   DenialCause::kShmCap,
    DenialCause::kVolumeName,  DenialCause::kContainer, DenialCause::kPlacement,   DenialCause::kNvlinkChannel,
    DenialCause::kUnreadable};
static_assert(kDenialCauses.size() == static_cast<std::size_t>(DenialCause::kUnreadable),
              "every cause but kNone is listed");

// A step's refusal: its cause and, in words, what to change.
struct Denial : Error {
  DenialCause cause = DenialCause::kNone;
};

inline Denial makeDenial(DenialCause cause, std::string message) { return Denial{{std::move(message)}, cause}; }

}  // namespace podshaper
