#include "base/timefmt.h"

#include <cctype>
#include <cstdio>
#include <ctime>
#include <limits>

namespace podshaper {
namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
long long daysFromCivil(long long y, unsigned m, unsigned d) {
  y -= m <= 2;
  const long long era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<long long>(doe) - 719468;
}

std::string format(long long epochSeconds, long long micros, bool withMicros) {
  const std::time_t t = static_cast<std::time_t>(epochSeconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[48];
  if (withMicros) {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, micros);
  } else {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec);
  }
  return buf;
}

bool digits(std::string_view s, std::size_t pos, std::size_t n, int& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

}  // namespace

std::string formatTime(long long epochSeconds) { return format(epochSeconds, 0, false); }

std::string formatMicroTime(long long epochMicros) {
  long long seconds = epochMicros / 1000000, micros = epochMicros % 1000000;
  if (micros < 0) {
    micros += 1000000;
    seconds -= 1;
  }
  return format(seconds, micros, true);
}

std::optional<long long> parseTimeMicros(std::string_view s) {
  int year, month, day, hour, minute, second;
  if (!digits(s, 0, 4, year) || s.size() < 20 || s[4] != '-' || !digits(s, 5, 2, month) || s[7] != '-' ||
      !digits(s, 8, 2, day) || (s[10] != 'T' && s[10] != 't') || !digits(s, 11, 2, hour) || s[13] != ':' ||
      !digits(s, 14, 2, minute) || s[16] != ':' || !digits(s, 17, 2, second)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return std::nullopt;
  std::size_t pos = 19;
  long long micros = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    std::size_t start = pos;
    long long scale = 100000;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
      micros += (s[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) return std::nullopt;
  }
  long long offset = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh, om;
    if (!digits(s, pos + 1, 2, oh) || pos + 3 >= s.size() || s[pos + 3] != ':' || !digits(s, pos + 4, 2, om) ||
        oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset = (oh * 3600LL + om * 60LL) * (s[pos] == '+' ? 1 : -1);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  const long long seconds =
      daysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day)) * 86400LL + hour * 3600LL +
      minute * 60LL + second - offset;
  return seconds * 1000000LL + micros;
}

std::optional<long long> parseTime(std::string_view text) {
  auto micros = parseTimeMicros(text);
  if (!micros) return std::nullopt;
  long long s = *micros / 1000000;
  if (*micros % 1000000 < 0) --s;
  return s;
}

std::optional<long long> parseDurationSeconds(std::string_view s) {
  if (s.empty()) return std::nullopt;
  constexpr long long kMax = std::numeric_limits<long long>::max() / 4;
  long long totalMillis = 0;
  std::size_t pos = 0;
  while (pos < s.size()) {
    std::size_t start = pos;
    long long value = 0;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
      value = value * 10 + (s[pos] - '0');
      if (value > kMax / 3600000) return std::nullopt;
      ++pos;
    }
    if (pos == start) return std::nullopt;
    long long unitMillis;
    if (s.substr(pos, 2) == "ms") {
      unitMillis = 1;
      pos += 2;
    } else if (pos < s.size() && (s[pos] == 'h' || s[pos] == 'm' || s[pos] == 's')) {
      unitMillis = s[pos] == 'h' ? 3600000 : s[pos] == 'm' ? 60000 : 1000;
      ++pos;
    } else {
      return std::nullopt;
    }
    totalMillis += value * unitMillis;
    if (totalMillis > kMax) return std::nullopt;
  }
  return (totalMillis + 999) / 1000;
}

}  // namespace podshaper
