#pragma once

// The Kubernetes API's wire rules as pure functions: URLs, content types,
// error decoding, retry delays, list pages and watch lines. No I/O here, so all
// of it is tested with data (and decodeWatchLine is fuzzed).

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/json_parse.h"
#include "base/result.h"
#include "kube/api_result.h"

namespace podshaper::kube {

// Far deeper than any API object (a few tens of levels): copying, comparing or
// dumping a JSON value recurses once per level, and a line nested 20,000 deep
// overflowed the stack when applyWatchEvent copied its object into the store.
// Every JSON text the client reads is refused past it.
constexpr int kMaxObjectDepth = 1000;

// ---- URLs

// The path of a resource collection or object: apiVersion "v1" lives under
// /api/v1, any other ("podshaper.io/v1alpha1") under /apis/<group>/<version>.
// Empty ns: cluster-scoped, or all namespaces; empty name: the collection.
//   resourcePath("v1", "pods", "ml", "train-0") == "/api/v1/namespaces/ml/pods/train-0"
std::string resourcePath(std::string_view apiVersion, std::string_view resource, std::string_view ns = "",
                         std::string_view name = "");

// Percent-encodes everything but RFC 3986 unreserved characters (for query values).
std::string percentEncode(std::string_view s);

using QueryParams = std::vector<std::pair<std::string, std::string>>;

// Appends the parameters to path (with '?' or '&'); parameters with empty values are left out.
std::string withQuery(const std::string& path, const QueryParams& params);

// One page of a list: path?labelSelector=..&fieldSelector=..&limit=N&continue=TOKEN (limit 0: unpaged).
std::string listPagePath(const std::string& path, const std::string& labelSelector,
                         const std::string& fieldSelector, int limit, const std::string& continueToken);

// The next page's limit: about targetBytes of JSON text at the bytes per item the last
// page had, at least 1 and at most maxItems (targetBytes 0, or a page without items:
// maxItems). A page is held as its text and as a tree at once while it is read: 500
// Nodes of a GPU cluster (77 labels, images, conditions) are 8.5 MB of text and several
// times that as a tree, 500 ResourceClaims under 1 MB.
int nextListLimit(std::size_t pageBytes, std::size_t pageItems, std::size_t targetBytes, int maxItems);

struct WatchOptions {
  std::string labelSelector;
  std::string fieldSelector;
  int timeoutSeconds = 300;  // the server ends the watch after this; 0 leaves it to the server
  bool allowBookmarks = true;
};

// path?watch=1&allowWatchBookmarks=true&resourceVersion=RV&timeoutSeconds=N (+ selectors).
std::string watchPath(const std::string& path, const std::string& resourceVersion, const WatchOptions& options);

// ---- Writes

enum class PatchType {
  Merge,           // application/merge-patch+json (RFC 7386)
  StrategicMerge,  // application/strategic-merge-patch+json (built-in types only)
  JsonPatch,       // application/json-patch+json (RFC 6902)
  Apply,           // application/apply-patch+yaml: server-side apply, needs a fieldManager
};
std::string_view patchContentType(PatchType type);

// ---- Errors and retries

// The error for a non-2xx response, from its metav1.Status body where there is one:
//   "PUT /apis/podshaper.io/v1alpha1/gputopologyreports/n1: 409 Conflict: Operation cannot be ..."
ApiError decodeApiError(std::string_view method, std::string_view path, int httpStatus, std::string_view body);

// The error for a request that got no response (code 0).
ApiError transportError(std::string_view method, std::string_view path, std::string_view what);

// How long to wait before sending the request again, or nullopt when it must not be
// retried: 429 always (API Priority and Fairness rejected it before doing anything);
// a 5xx carrying Retry-After only when the request is idempotent. Retry-After is in
// seconds (the API server never sends an HTTP date); missing or bad means 1 s.
std::optional<std::chrono::milliseconds> retryDelay(int httpStatus, std::string_view retryAfter, bool idempotent,
                                                    std::chrono::milliseconds cap);

// ---- Lists

// What a list page says beside its items: kind, apiVersion and metadata.resourceVersion
// as they were (nullopt where absent) and metadata.continue ("" on the last page).
struct ListPage {
  std::optional<nlohmann::json> kind;
  std::optional<nlohmann::json> apiVersion;
  std::optional<nlohmann::json> resourceVersion;
  std::string continueToken;
  std::size_t items = 0;
};

// Reads a list page's text item by item: `onItem` gets each of its items in order, each
// parsed alone by `reader` (simdjson for an item of up to 64 KiB), so that no tree of the
// whole page is ever built (a page of 61 GPU Nodes is about 1 MiB of text, and nlohmann's
// tree of it several times that). What it accepts is what nlohmann::json::parse of the
// whole page accepts, read the same way (the last of duplicate members kept), with objects
// and arrays nested deeper than maxDepth refused (an item's levels count after the page's
// two). An Error ("list: ...") for text that is not JSON (saying where, as reading the
// whole page would), not an object with an items array (or null: no items), or with two
// items members; the items already given to onItem then belong to a list to be dropped.
Result<ListPage> readListPage(JsonReader& reader, std::string_view text, int maxDepth,
                              const std::function<void(nlohmann::json&&)>& onItem);

// ---- Watches

struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED, BOOKMARK or ERROR
  nlohmann::json object;
};

// One line of a watch stream: {"type":"ADDED","object":{...}}. A trailing '\r' is
// ignored. Anything else (not JSON, nested deeper than 1000, no or unknown type,
// object not a JSON object) is an Error that says what was wrong. `reader` reads it: one
// kept across a stream's lines keeps simdjson's buffers.
Result<WatchEvent> decodeWatchLine(JsonReader& reader, std::string_view line);

// An ERROR event carrying a Status with code 410 (Expired / Gone): the
// resourceVersion is too old and the caller must relist.
bool isGoneEvent(const WatchEvent& event);

// metadata.resourceVersion, or "" when absent.
std::string resourceVersionOf(const nlohmann::json& object);

// "reason: message" of a metav1.Status object (for ERROR events).
std::string describeStatus(const nlohmann::json& status);

// Cuts a byte stream into lines as it arrives. A line longer than maxLine bytes
// is an error (a broken or hostile stream must not eat memory).
class LineSplitter {
 public:
  explicit LineSplitter(std::size_t maxLine = 64u << 20) : maxLine_(maxLine) {}

  // Adds bytes; false when the line being assembled has grown past maxLine.
  bool append(std::string_view bytes);
  // The next complete line, without its "\n" (or "\r\n").
  std::optional<std::string> next();
  // Bytes of an unfinished line (a stream that ends here was cut off).
  std::size_t pending() const { return buffer_.size() - start_; }

 private:
  std::string buffer_;
  std::size_t start_ = 0;  // first byte not returned yet
  std::size_t scan_ = 0;   // where to look for the next '\n'
  std::size_t open_ = 0;   // where the unfinished line begins
  std::size_t maxLine_;
};

}  // namespace podshaper::kube
