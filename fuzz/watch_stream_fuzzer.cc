// A Kubernetes watch stream as the informers read it (kube/protocol.h,
// kube/store.h): bytes arrive in chunks, LineSplitter cuts lines,
// decodeWatchLine decodes events, applyWatchEvent keeps the ObjectStore, and
// the webhook builds its ClusterView from the stored Namespaces and Nodes.
//
// Input: 4 header bytes, then the stream. Chunk k has 1 + header[k % 4] bytes.
// header[0] ≥ 128 also caps lines at 32 + 16 × (header[0] − 128) bytes (else
// the informers' 64 MiB), to reach the overlong-line path.
//
// Invariants: the lines are exactly the stream's '\n'-separated lines (less a
// trailing '\r'), pending() is the unfinished tail, append() refuses exactly
// when that tail passes the cap; applyWatchEvent says "changed" whenever the
// stored object for the key changed (and, for objects with a resourceVersion,
// only then), and ADDED/MODIFIED/DELETED leave the store as they say.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "kube/protocol.h"
#include "kube/store.h"
#include "shaping/cluster_view.h"

namespace {

using nlohmann::json;
namespace kube = podshaper::kube;

void applyLine(podshaper::JsonReader& reader, const std::string& line, kube::ObjectStore& store) {
  if (line.empty()) return;  // the client skips blank lines
  auto event = kube::decodeWatchLine(reader, line);
  if (!event) {
    FUZZ_CHECK(event.error().message.starts_with("watch: "), event.error().message);
    return;
  }
  FUZZ_CHECK(event->object.is_object(), line);
  (void)kube::isGoneEvent(*event);
  (void)kube::resourceVersionOf(event->object);
  if (event->type == "ERROR") {
    // The message goes into logs and errors; it must stay printable JSON text.
    const std::string status = kube::describeStatus(event->object);
    (void)json(status).dump();
  }

  auto key = kube::objectKey(event->object);
  std::optional<json> before;
  if (key) {
    if (auto it = store.find(*key); it != store.end()) before = it->second;
  }
  const std::size_t sizeBefore = store.size();
  auto changed = kube::applyWatchEvent(store, *event);
  if (!changed) {
    FUZZ_CHECK(!key.ok() && event->type != "BOOKMARK" && event->type != "ERROR", changed.error().message);
    FUZZ_CHECK(store.size() == sizeBefore, line);
    return;
  }
  if (event->type == "BOOKMARK" || event->type == "ERROR") {
    FUZZ_CHECK(!*changed && store.size() == sizeBefore, line);
    return;
  }
  FUZZ_CHECK(key.ok(), line);
  std::optional<json> after;
  if (auto it = store.find(*key); it != store.end()) after = it->second;
  // "Not changed": the same object, or the same but for its resourceVersion (stored, not
  // told: kube::sameButVersion). "Changed" may be said of an object replaced by an equal
  // one without a resourceVersion (the API server always sends one); never the other way.
  const bool sameButVersion = before && after && kube::sameButVersion(*before, *after);
  FUZZ_CHECK(*changed || before == after || sameButVersion, line);
  FUZZ_CHECK(*changed == (before != after && !sameButVersion) || kube::resourceVersionOf(event->object).empty(),
             line);
  if (event->type == "DELETED") {
    FUZZ_CHECK(!after, line);
  } else {
    FUZZ_CHECK(after.has_value(), line);
    const std::string rv = kube::resourceVersionOf(event->object);
    const bool sameVersion = before && !rv.empty() && rv == kube::resourceVersionOf(*before);
    FUZZ_CHECK(sameVersion ? *after == *before : *after == event->object, line);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const uint8_t header[4] = {data[0], data[1], data[2], data[3]};
  const std::string_view stream = podshaper::fuzz::asText(data + 4, size - 4);
  const std::size_t maxLine = header[0] >= 128 ? 32 + 16 * std::size_t(header[0] - 128) : std::size_t(64) << 20;

  kube::LineSplitter splitter(maxLine);
  kube::ObjectStore store;
  podshaper::JsonReader reader;  // one for the stream's lines, as a watch keeps it
  std::size_t expectedLineStart = 0;  // in `stream`: where the next line begins
  std::size_t fed = 0;
  std::size_t tailStart = 0;  // in `stream`: after the last '\n' fed so far
  for (std::size_t k = 0; fed < stream.size(); ++k) {
    const std::size_t n = std::min<std::size_t>(1 + header[k % 4], stream.size() - fed);
    const std::string_view chunk = stream.substr(fed, n);
    const bool fits = splitter.append(chunk);
    if (const std::size_t nl = chunk.rfind('\n'); nl != std::string_view::npos) tailStart = fed + nl + 1;
    fed += n;
    while (auto line = splitter.next()) {
      const std::size_t nl = stream.find('\n', expectedLineStart);
      FUZZ_CHECK(nl != std::string_view::npos && nl < fed, "a line before its newline arrived");
      std::string_view want = stream.substr(expectedLineStart, nl - expectedLineStart);
      if (!want.empty() && want.back() == '\r') want.remove_suffix(1);
      FUZZ_CHECK(*line == want, "line \"" + *line + "\", expected \"" + std::string(want) + "\"");
      expectedLineStart = nl + 1;
      applyLine(reader, *line, store);
    }
    // Every complete line was returned; what is left is the unfinished one.
    FUZZ_CHECK(expectedLineStart == tailStart, "a line was held back");
    FUZZ_CHECK(splitter.pending() == fed - expectedLineStart, std::to_string(splitter.pending()));
    FUZZ_CHECK(fits == (fed - expectedLineStart <= maxLine), "append() said " + std::to_string(fits));
    if (!fits) break;  // the client ends the watch here
  }

  // What the webhook's ClusterCache does with the stored objects.
  std::vector<json> objects;
  for (const auto& [key, object] : store) objects.push_back(object);
  const podshaper::ClusterView view = podshaper::buildClusterView(objects, objects);
  (void)view.hasPodshaperLabels();
  const auto keys = kube::changedKeys({}, store);
  FUZZ_CHECK(keys.size() == store.size(), "changedKeys from an empty store");
  return 0;
}
