#pragma once

#include "base/result.h"
#include "kube/config.h"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace podshaper::kube {

// Loads the config's CA bundle (added to the system's roots) and client
// certificate chain + key, all from PEM in memory, into an asio SSL context.
// An Error names the part that did not load and OpenSSL's reason.
Result<void> applyTlsConfig(boost::asio::ssl::context& context, const ClientConfig& config);

// Checks that the config's PEM material loads and that the key matches the
// certificate, without any connection (a Client checks this once, up front).
Result<void> checkTlsConfig(const ClientConfig& config);

}  // namespace podshaper::kube
