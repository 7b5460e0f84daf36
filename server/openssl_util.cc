#include "server/openssl_util.h"

#include <openssl/err.h>
#include <openssl/pem.h>

#include <array>
#include <ctime>

namespace podshaper::server::openssl {

namespace {

int refusePassphrase(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*userdata*/) { return 0; }

std::string hex(const unsigned char* data, std::size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 0x0f]);
  }
  return out;
}

}  // namespace

std::string takeErrors() {
  std::string out;
  while (unsigned long code = ERR_get_error()) {
    std::array<char, 256> buf{};
    ERR_error_string_n(code, buf.data(), buf.size());
    if (!out.empty()) out += "; ";
    out += buf.data();
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

BioPtr memoryBio(std::string_view data) {
  return BioPtr(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
}

X509Ptr readPemCertificate(std::string_view pem) {
  BioPtr bio = memoryBio(pem);
  if (!bio) return nullptr;
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, refusePassphrase, nullptr));
}

EvpPkeyPtr readPemPrivateKey(std::string_view pem) {
  BioPtr bio = memoryBio(pem);
  if (!bio) return nullptr;
  return EvpPkeyPtr(PEM_read_bio_PrivateKey(bio.get(), nullptr, refusePassphrase, nullptr));
}

std::string sha256Hex(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), md.data(), &size, EVP_sha256(), nullptr) != 1) {
    return {};
  }
  return hex(md.data(), size);
}

std::string certificateSha256(const X509& cert) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int size = 0;
  if (X509_digest(&cert, EVP_sha256(), md.data(), &size) != 1) return {};
  return hex(md.data(), size);
}

std::string serialHex(const X509& cert) {
  BignumPtr bn(ASN1_INTEGER_to_BN(X509_get0_serialNumber(&cert), nullptr));
  if (!bn) return {};
  char* text = BN_bn2hex(bn.get());
  if (text == nullptr) return {};
  std::string out(text);
  OPENSSL_free(text);
  return out;
}

std::string subjectText(const X509& cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio) return {};
  X509_NAME_print_ex(bio.get(), X509_get_subject_name(&cert), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  long size = BIO_get_mem_data(bio.get(), &data);
  return size > 0 ? std::string(data, static_cast<std::size_t>(size)) : std::string();
}

std::optional<std::int64_t> notAfterUnix(const X509& cert) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(&cert), &tm) != 1) return std::nullopt;
  return static_cast<std::int64_t>(timegm(&tm));
}

std::string notAfterText(const X509& cert) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(&cert), &tm) != 1) return "unknown";
  std::array<char, 32> buf{};
  std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf.data();
}

}  // namespace podshaper::server::openssl
