#pragma once

#include <string>
#include <utility>

#include "base/result.h"

namespace podshaper::kube {

// An Error from the Kubernetes API (or from reaching it) that keeps the HTTP
// status, so that callers can tell "not there" from "try again" from "relist".
// It is an Error: `message` reads like every other podshaper error, e.g.
//   GET /api/v1/nodes/gpu-1: 404 NotFound: nodes "gpu-1" not found
struct ApiError : Error {
  int code = 0;        // HTTP status; 0 when no response came (connect, TLS, timeout)
  std::string reason;  // metav1.Status.reason: NotFound, AlreadyExists, Conflict, Expired...

  bool isNotFound() const { return code == 404; }
  bool isForbidden() const { return code == 403; }
  bool isConflict() const { return code == 409; }  // AlreadyExists on create, stale resourceVersion on update
  bool isGone() const { return code == 410; }      // resourceVersion too old: relist
  bool isTooManyRequests() const { return code == 429; }
  bool isTransport() const { return code == 0; }
};

inline ApiError makeApiError(int code, std::string reason, std::string message) {
  ApiError e;
  e.message = std::move(message);
  e.code = code;
  e.reason = std::move(reason);
  return e;
}

// Result<T> with an ApiError; converts to Result<T> where the code does not
// matter: `Result<nlohmann::json> r = client.get(path);`.
template <class T>
using ApiResult = Result<T, ApiError>;

}  // namespace podshaper::kube
