#include "base/base64.h"

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace podshaper {
namespace {
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Every 12 bits of input as their two output characters: a 3-byte group is two lookups.
constexpr std::array<std::array<char, 2>, 4096> kPairs = [] {
  std::array<std::array<char, 2>, 4096> t{};
  for (unsigned i = 0; i < 4096; ++i) t[i] = {kAlphabet[i >> 6], kAlphabet[i & 63]};
  return t;
}();

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// 24 bytes into 32 characters with AVX2, while 28 can be read (W. Muła and D. Lemire,
// "Faster Base64 Encoding and Decoding Using AVX2 Instructions", 2018): each 3-byte group
// spread over 32 bits, its four 6-bit values moved into bytes by two multiplies, and each
// value turned into its character by one table lookup of an offset. Returns the bytes read.
__attribute__((target("avx2"))) std::size_t encodeAvx2(const unsigned char* in, std::size_t size, char*& to) {
  const __m256i spread = _mm256_set_epi8(10, 11, 9, 10, 7, 8, 6, 7, 4, 5, 3, 4, 1, 2, 0, 1,
                                         10, 11, 9, 10, 7, 8, 6, 7, 4, 5, 3, 4, 1, 2, 0, 1);
  const __m256i offsets = _mm256_setr_epi8('a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
                                           '0' - 52, '0' - 52, '0' - 52, '0' - 52, '+' - 62, '/' - 63, 'A', 0, 0,
                                           'a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
                                           '0' - 52, '0' - 52, '0' - 52, '0' - 52, '+' - 62, '/' - 63, 'A', 0, 0);
  std::size_t i = 0;
  for (; i + 28 <= size; i += 24, to += 32) {
    // 12 bytes in each 128-bit half (a load of 16 each).
    const __m128i low = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    const __m128i high = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 12));
    __m256i v = _mm256_shuffle_epi8(_mm256_inserti128_si256(_mm256_castsi128_si256(low), high, 1), spread);
    const __m256i a =
        _mm256_mulhi_epu16(_mm256_and_si256(v, _mm256_set1_epi32(0x0fc0fc00)), _mm256_set1_epi32(0x04000040));
    const __m256i b =
        _mm256_mullo_epi16(_mm256_and_si256(v, _mm256_set1_epi32(0x003f03f0)), _mm256_set1_epi32(0x01000010));
    const __m256i values = _mm256_or_si256(a, b);  // 0..63 in each byte
    // Which offset: 0..25 'A' (13), 26..51 'a' (0), 52..61 '0' (1..10), 62 '+' (11), 63 '/' (12).
    __m256i which = _mm256_subs_epu8(values, _mm256_set1_epi8(51));
    const __m256i letters = _mm256_cmpgt_epi8(_mm256_set1_epi8(26), values);  // 0..25
    which = _mm256_or_si256(which, _mm256_and_si256(letters, _mm256_set1_epi8(13)));
    v = _mm256_add_epi8(_mm256_shuffle_epi8(offsets, which), values);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(to), v);
  }
  return i;
}

bool hasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

// `data` into `to`, '=' padding included: (data.size() + 2) / 3 * 4 characters.
void encodeInto(std::string_view data, char* to) {
  const auto* in = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t i = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (hasAvx2()) i = encodeAvx2(in, data.size(), to);
#endif
  // Six bytes at a time while eight can be read: one load, four 12-bit lookups, one store.
  for (; i + 8 <= data.size(); i += 6, to += 8) {
    uint64_t w;
    std::memcpy(&w, in + i, 8);
    if constexpr (std::endian::native == std::endian::little) w = __builtin_bswap64(w);
    char eight[8];
    std::memcpy(eight, kPairs[(w >> 52) & 4095].data(), 2);
    std::memcpy(eight + 2, kPairs[(w >> 40) & 4095].data(), 2);
    std::memcpy(eight + 4, kPairs[(w >> 28) & 4095].data(), 2);
    std::memcpy(eight + 6, kPairs[(w >> 16) & 4095].data(), 2);
    std::memcpy(to, eight, 8);
  }
  for (; i + 2 < data.size(); i += 3, to += 4) {
    const unsigned n = (in[i] << 16) | (in[i + 1] << 8) | in[i + 2];
    std::memcpy(to, kPairs[n >> 12].data(), 2);
    std::memcpy(to + 2, kPairs[n & 4095].data(), 2);
  }
  const std::size_t rest = data.size() - i;
  if (rest > 0) {
    unsigned n = in[i] << 16;
    if (rest == 2) n |= in[i + 1] << 8;
    to[0] = kAlphabet[(n >> 18) & 63];
    to[1] = kAlphabet[(n >> 12) & 63];
    to[2] = rest == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    to[3] = '=';
  }
}

}  // namespace

std::string base64Encode(std::string_view data) {
  // Through a buffer on the stack, a block at a time: a string made at its length would be
  // filled first (a patch's base64 is about 10 KB), only to be written over.
  constexpr std::size_t kBlock = 3 * 1024;  // whole 3-byte groups: only the last is padded
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  char buffer[kBlock / 3 * 4];
  for (std::size_t at = 0; at < data.size(); at += kBlock) {
    const std::string_view block = data.substr(at, kBlock);
    encodeInto(block, buffer);
    out.append(buffer, (block.size() + 2) / 3 * 4);
  }
  return out;
}

Result<std::string> base64Decode(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(text.size() * 3 / 4);
  unsigned buffer = 0;
  int bits = 0;
  size_t digits = 0;
  size_t padding = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    if (padding > 0) return makeError("data after '=' padding at offset " + std::to_string(i));
    const int v = value(c);
    if (v < 0) return makeError("invalid character at offset " + std::to_string(i));
    ++digits;
    buffer = (buffer << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xFF));
    }
  }
  if (digits % 4 == 1) return makeError("truncated input");
  if (padding > 2 || (padding > 0 && (digits + padding) % 4 != 0)) return makeError("bad '=' padding");
  return out;
}

}  // namespace podshaper
