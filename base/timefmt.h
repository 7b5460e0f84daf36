#pragma once

#include <optional>
#include <string>
#include <string_view>

// RFC 3339 timestamps as the Kubernetes API writes them. Times are seconds (or
// microseconds) since the Unix epoch, passed in by the caller: core reads no clock.
namespace podshaper {

// "2026-11-22T01:15:44Z" (metav1.Time).
std::string formatTime(long long epochSeconds);

// "2026-11-22T01:15:44.123456Z" (metav1.MicroTime, used by Leases and events.k8s.io).
std::string formatMicroTime(long long epochMicros);

// Reads "2026-11-22T01:15:44Z", with optional fractional seconds and a "Z" or
// "+hh:mm"/"-hh:mm" offset. Microseconds since the epoch; nullopt when it does not parse.
std::optional<long long> parseTimeMicros(std::string_view text);

// The same, truncated to whole seconds.
std::optional<long long> parseTime(std::string_view text);

// A Go/metav1.Duration such as "10m", "1h30m", "90s", "500ms" (units h, m, s, ms;
// no sign; at least one unit). Seconds, rounded up; nullopt when it does not parse
// or overflows.
std::optional<long long> parseDurationSeconds(std::string_view text);

}  // namespace podshaper
