// A list page as the informers read it (kube/protocol.h, readListPage): item by item,
// never as one tree, each item parsed alone.
//
// Input: 1 header byte, then the page's text. A header under 128 reads the page with a
// depth limit of 1 + header % 8 (to reach the limit's edges); else the client's own
// kMaxObjectDepth.
//
// Invariants: readListPage accepts exactly what nlohmann::json::parse of the whole page
// accepts as a list (an object whose items is an array or null, nested no deeper than
// the limit), but for a page with two items members, which it refuses as such; what it
// accepts it reads as nlohmann does: the same items in order, kind, apiVersion,
// metadata.resourceVersion and continue as the last of duplicate members says. Every
// error starts "list: " and, where the page is not JSON, says so.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/json_util.h"
#include "fuzz/fuzz_check.h"
#include "kube/protocol.h"

namespace {

using nlohmann::json;
namespace kube = podshaper::kube;
using podshaper::fuzz::show;

std::optional<json> memberOf(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) return std::nullopt;
  return object.at(key);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int maxDepth = data[0] < 128 ? 1 + data[0] % 8 : kube::kMaxObjectDepth;
  const std::string_view text = podshaper::fuzz::asText(data + 1, size - 1);

  podshaper::JsonReader reader;
  std::vector<json> items;
  auto page = kube::readListPage(reader, text, maxDepth, [&](json&& item) { items.push_back(std::move(item)); });

  // nlohmann's parser ends the text at a NUL outside a string (one inside is an error
  // either way): the text it reads, and whose depth counts, is what comes before the first.
  const std::string_view read = text.substr(0, text.find('\0'));
  json whole = podshaper::nestedDeeperThan(read, maxDepth) ? json(json::value_t::discarded)
                                                             : json::parse(read, nullptr, false);
  const bool isJson = !whole.is_discarded();
  const bool isList = isJson && whole.is_object() && whole.contains("items") &&
                      (whole["items"].is_array() || whole["items"].is_null());
  if (!page) {
    const std::string& message = page.error().message;
    FUZZ_CHECK(message.starts_with("list: "), message);
    if (!isJson) {
      FUZZ_CHECK(message.starts_with("list: response is not JSON ("), message);
    } else if (isList) {
      FUZZ_CHECK(message == "list: response has two items members", message);
    } else {
      // Two items members, the last not a list: nlohmann keeps the last.
      FUZZ_CHECK(message == "list: response is not a JSON object" ||
                     message.starts_with("list: response has no items array (kind ") ||
                     message == "list: response has two items members",
                 message);
    }
    return 0;
  }
  FUZZ_CHECK(isList, "accepted what is not a list: " + std::string(text.substr(0, 200)));
  const json want = whole["items"].is_null() ? json::array() : whole["items"];
  FUZZ_CHECK(json(items) == want, show(json(items)) + " != " + show(want));
  FUZZ_CHECK(page->items == items.size(), std::to_string(page->items));
  FUZZ_CHECK(page->kind == memberOf(whole, "kind"), "kind");
  FUZZ_CHECK(page->apiVersion == memberOf(whole, "apiVersion"), "apiVersion");
  const json meta = whole.contains("metadata") ? whole["metadata"] : json();
  FUZZ_CHECK(page->resourceVersion == memberOf(meta, "resourceVersion"), "resourceVersion");
  FUZZ_CHECK(page->continueToken == podshaper::stringMember(meta, "continue"), page->continueToken);
  return 0;
}
