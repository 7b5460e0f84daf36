#include "pki/openssl_util.h"

#include <arpa/inet.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/obj_mac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#include <array>
#include <climits>
#include <ctime>

namespace podshaper::pki::openssl {

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

std::optional<std::int64_t> unixTime(const ASN1_TIME* time) {
  std::tm tm{};
  if (time == nullptr || ASN1_TIME_to_tm(time, &tm) != 1) return std::nullopt;
  return static_cast<std::int64_t>(timegm(&tm));
}

Error failure(const std::string& what) { return Error{what + ": " + takeErrors()}; }

bool isDnsNameCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '-' || c == '_' || c == '*';
}

Result<void> setRandomSerial(X509& cert) {
  // A leading 0x01 keeps all 128 random bits, the INTEGER positive and non-zero,
  // and its length fixed at 17 octets (RFC 5280 allows 20).
  std::array<unsigned char, 17> bytes{0x01};
  if (RAND_bytes(bytes.data() + 1, static_cast<int>(bytes.size() - 1)) != 1) {
    return failure("cannot draw a random serial");
  }
  BignumPtr bn(BN_bin2bn(bytes.data(), static_cast<int>(bytes.size()), nullptr));
  if (!bn || BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(&cert)) == nullptr) {
    return failure("cannot set the serial");
  }
  return {};
}

template <class Write>
Result<std::string> pem(Write write, const std::string& what) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get()) != 1) return failure("cannot encode the " + what + " as PEM");
  char* data = nullptr;
  long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(size));
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
  if (data.size() > static_cast<std::size_t>(INT_MAX)) return nullptr;
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

std::optional<std::int64_t> notBeforeUnix(const X509& cert) {
  return unixTime(X509_get0_notBefore(&cert));
}

std::optional<std::int64_t> notAfterUnix(const X509& cert) {
  return unixTime(X509_get0_notAfter(&cert));
}

std::string notAfterText(const X509& cert) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(&cert), &tm) != 1) return "unknown";
  std::array<char, 32> buf{};
  std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf.data();
}

bool isIpAddress(const std::string& s) {
  std::array<unsigned char, sizeof(struct in6_addr)> buf{};
  return inet_pton(AF_INET, s.c_str(), buf.data()) == 1 ||
         inet_pton(AF_INET6, s.c_str(), buf.data()) == 1;
}

Result<std::string> subjectAltNameValue(const std::vector<std::string>& names) {
  std::string value;
  for (const std::string& name : names) {
    if (name.empty()) return Error{"SAN \"\" is empty"};
    bool ip = isIpAddress(name);
    if (!ip) {
      for (char c : name) {
        if (!isDnsNameCharacter(c)) {
          return Error{"SAN \"" + name + "\" is neither an IP address nor a DNS name"};
        }
      }
    }
    if (!value.empty()) value += ',';
    value += (ip ? "IP:" : "DNS:") + name;
  }
  return value;
}

Result<EvpPkeyPtr> makeP256Key() {
  EvpPkeyCtxPtr ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nullptr));
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 ||
      EVP_PKEY_CTX_set_ec_paramgen_curve_nid(ctx.get(), NID_X9_62_prime256v1) != 1 ||
      EVP_PKEY_keygen(ctx.get(), &raw) != 1) {
    return failure("cannot generate an EC P-256 key");
  }
  return EvpPkeyPtr(raw);
}

Result<X509Ptr> newCertificate(EVP_PKEY& key, const std::string& commonName, X509* issuer,
                               std::time_t notBefore, std::time_t notAfter) {
  X509Ptr cert(X509_new());
  if (!cert) return failure("cannot allocate a certificate");
  X509& x = *cert;
  if (X509_set_version(&x, 2) != 1) return failure("cannot set version 3");
  if (auto r = setRandomSerial(x); !r) return r.error();
  if (ASN1_TIME_set(X509_getm_notBefore(&x), notBefore) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(&x), notAfter) == nullptr) {
    return failure("cannot set the validity");
  }
  X509_NAME* subject = X509_get_subject_name(&x);
  if (X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(commonName.c_str()),
                                 static_cast<int>(commonName.size()), -1, 0) != 1) {
    return failure("cannot set the name CN=" + commonName);
  }
  if (X509_set_issuer_name(&x, issuer != nullptr ? X509_get_subject_name(issuer) : subject) != 1) {
    return failure("cannot set the issuer name");
  }
  if (X509_set_pubkey(&x, &key) != 1) return failure("cannot set the public key");
  return cert;
}

Result<void> addExtension(X509& cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer != nullptr ? issuer : &cert, &cert, nullptr, nullptr, 0);
  X509ExtensionPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(&cert, ext.get(), -1) != 1) {
    return failure(std::string("cannot add extension ") + OBJ_nid2sn(nid) + " = " + value);
  }
  return {};
}

Result<std::string> certificatePem(const X509& cert) {
  return pem([&](BIO* bio) { return PEM_write_bio_X509(bio, &cert); }, "certificate");
}

Result<std::string> privateKeyPem(const EVP_PKEY& key) {
  return pem(
      [&](BIO* bio) {
        return PEM_write_bio_PrivateKey(bio, &key, nullptr, nullptr, 0, nullptr, nullptr);
      },
      "private key");
}

}  // namespace podshaper::pki::openssl
