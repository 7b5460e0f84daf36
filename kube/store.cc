#include "kube/store.h"

#include <zlib.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "base/json_parse.h"
#include "base/json_util.h"

namespace podshaper::kube {
namespace {

// A packed object is one JSON binary value of this subtype; its bytes: the
// resourceVersion and the store key, each after its length (2 bytes), then the length of
// the object's JSON text without its resourceVersion (4 bytes) and that text, compressed.
// One allocation beside the store's own: a tree of the key and version in the clear cost
// more than the compressed object.
constexpr std::uint64_t kPackedSubtype = 0x50;

struct Packed {
  std::string_view version, key;
  const std::uint8_t* text = nullptr;  // the compressed text, after its length
  std::size_t textBytes = 0;
  std::uint32_t length = 0;
};

bool isPacked(const nlohmann::json& stored) {
  return stored.is_binary() && stored.get_binary().has_subtype() && stored.get_binary().subtype() == kPackedSubtype;
}

void putLength(std::vector<std::uint8_t>& out, std::size_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

// The parts of a packed value; nullopt when its bytes are too short for what they say.
std::optional<Packed> readPacked(const nlohmann::json& stored) {
  const auto& bytes = stored.get_binary();
  std::size_t at = 0;
  auto length = [&](int n) -> std::optional<std::size_t> {
    if (bytes.size() - at < static_cast<std::size_t>(n)) return std::nullopt;
    std::size_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<std::size_t>(bytes[at + i]) << (8 * i);
    at += n;
    return v;
  };
  auto text = [&](std::size_t n) -> std::optional<std::string_view> {
    if (bytes.size() - at < n) return std::nullopt;
    std::string_view v(reinterpret_cast<const char*>(bytes.data() + at), n);
    at += n;
    return v;
  };
  Packed p;
  auto versionBytes = length(2);
  auto version = versionBytes ? text(*versionBytes) : std::nullopt;
  auto keyBytes = version ? length(2) : std::nullopt;
  auto key = keyBytes ? text(*keyBytes) : std::nullopt;
  auto textLength = key ? length(4) : std::nullopt;
  if (!textLength) return std::nullopt;
  p.version = *version;
  p.key = *key;
  p.length = static_cast<std::uint32_t>(*textLength);
  p.text = bytes.data() + at;
  p.textBytes = bytes.size() - at;
  return p;
}

// Reads packed objects' texts on each thread that unpacks them (an informer's snapshot, a
// lookup): a reader kept per thread makes simdjson's buffers once, not for each object.
thread_local JsonReader packedObjectReader;

}  // namespace

Result<std::string> objectKey(const nlohmann::json& object) {
  if (isPacked(object)) {
    auto packed = readPacked(object);
    if (!packed || packed->key.empty()) return makeError("packed object: no key");
    return std::string(packed->key);
  }
  if (!object.is_object()) return makeError("object is not a JSON object");
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return makeError("object has no metadata");
  auto name = meta->find("name");
  if (name == meta->end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return makeError("object has no metadata.name");
  }
  auto ns = meta->find("namespace");
  if (ns != meta->end() && ns->is_string() && !ns->get_ref<const std::string&>().empty()) {
    return ns->get<std::string>() + "/" + name->get<std::string>();
  }
  return name->get<std::string>();
}

ObjectStore storeFromList(const nlohmann::json& list) {
  ObjectStore store;
  if (!list.is_object()) return store;
  auto items = list.find("items");
  if (items == list.end() || !items->is_array()) return store;
  for (const auto& item : *items) {
    auto key = objectKey(item);
    if (key) store[*key] = item;
  }
  return store;
}

ObjectStore storeFromList(nlohmann::json&& list) {
  ObjectStore store;
  if (!list.is_object()) return store;
  auto items = list.find("items");
  if (items == list.end() || !items->is_array()) return store;
  for (auto& item : *items) {
    auto key = objectKey(item);
    if (key) store[*key] = std::move(item);
  }
  return store;
}

nlohmann::json packObject(const nlohmann::json& object) {
  auto key = objectKey(object);
  if (!key) return object;  // kept as it is: the store's rules say what is wrong with it
  std::string version = resourceVersionOf(object);
  if (version.size() > 0xffff || key->size() > 0xffff) return object;
  nlohmann::json rest = object;
  if (auto m = rest.find("metadata"); m != rest.end() && m->is_object()) m->erase("resourceVersion");
  const std::string text = rest.dump();
  if (text.size() > 0xffffffffu) return object;
  std::vector<std::uint8_t> bytes;
  uLongf size = compressBound(text.size());
  bytes.reserve(2 + version.size() + 2 + key->size() + 4 + size);
  putLength(bytes, version.size(), 2);
  bytes.insert(bytes.end(), version.begin(), version.end());
  putLength(bytes, key->size(), 2);
  bytes.insert(bytes.end(), key->begin(), key->end());
  putLength(bytes, text.size(), 4);
  const std::size_t header = bytes.size();
  bytes.resize(header + size);
  if (compress2(bytes.data() + header, &size, reinterpret_cast<const Bytef*>(text.data()), text.size(), 1) != Z_OK) {
    return object;  // never for a buffer of compressBound bytes; kept whole then
  }
  bytes.resize(header + size);
  bytes.shrink_to_fit();
  return nlohmann::json::binary(std::move(bytes), kPackedSubtype);
}

Result<nlohmann::json> unpackObject(const nlohmann::json& stored) {
  if (!isPacked(stored)) return stored;
  auto packed = readPacked(stored);
  if (!packed) return makeError("packed object: shorter than its lengths say");
  std::string text(packed->length, '\0');
  uLongf size = packed->length;
  if (uncompress(reinterpret_cast<Bytef*>(text.data()), &size, packed->text, packed->textBytes) != Z_OK ||
      size != packed->length) {
    return makeError("packed object: its bytes do not uncompress");
  }
  auto parsed = packedObjectReader.read(text, kMaxObjectDepth);
  if (!parsed) return makeError("packed object: its text is not JSON (" + parsed.error().message + ")");
  nlohmann::json object = std::move(*parsed);
  if (!packed->version.empty() && object.is_object()) {
    object["metadata"]["resourceVersion"] = std::string(packed->version);
  }
  return object;
}

std::string storedVersionOf(const nlohmann::json& stored) {
  if (!isPacked(stored)) return resourceVersionOf(stored);
  auto packed = readPacked(stored);
  return packed ? std::string(packed->version) : std::string();
}

bool sameButVersion(const nlohmann::json& a, const nlohmann::json& b) {
  if (isPacked(a) && isPacked(b)) {
    auto pa = readPacked(a), pb = readPacked(b);
    if (!pa || !pb) return a == b;
    return pa->key == pb->key && pa->length == pb->length &&
           std::string_view(reinterpret_cast<const char*>(pa->text), pa->textBytes) ==
               std::string_view(reinterpret_cast<const char*>(pb->text), pb->textBytes);
  }
  if (!a.is_object() || !b.is_object() || a.size() != b.size()) return a == b;
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j) {  // both sorted by key
    if (i.key() != j.key()) return false;
    if (i.key() != "metadata" || !i->is_object() || !j->is_object()) {
      if (*i != *j) return false;
      continue;
    }
    // metadata, but its resourceVersion
    auto mi = i->begin(), mj = j->begin();
    while (true) {
      if (mi != i->end() && mi.key() == "resourceVersion") ++mi;
      if (mj != j->end() && mj.key() == "resourceVersion") ++mj;
      if (mi == i->end() || mj == j->end()) {
        if (mi != i->end() || mj != j->end()) return false;
        break;
      }
      if (mi.key() != mj.key() || *mi != *mj) return false;
      ++mi;
      ++mj;
    }
  }
  return true;
}

Result<bool> applyWatchEvent(ObjectStore& store, const WatchEvent& event) {
  if (event.type == "BOOKMARK" || event.type == "ERROR") return false;
  auto key = objectKey(event.object);
  if (!key) return makeError("watch " + event.type + " event: " + key.error().message);
  if (event.type == "DELETED") return store.erase(*key) > 0;
  if (event.type != "ADDED" && event.type != "MODIFIED") {
    return makeError("watch event: unknown type \"" + event.type + "\"");
  }
  auto it = store.find(*key);
  if (it == store.end()) {
    store.emplace(*key, event.object);
    return true;
  }
  const std::string newRv = storedVersionOf(event.object);
  if (!newRv.empty() && newRv == storedVersionOf(it->second)) return false;
  const bool changed = !sameButVersion(it->second, event.object);
  it->second = event.object;
  return changed;
}

std::vector<std::string> changedKeys(const ObjectStore& before, const ObjectStore& after) {
  std::vector<std::string> keys;
  auto b = before.begin();
  auto a = after.begin();
  while (b != before.end() || a != after.end()) {
    if (a == after.end() || (b != before.end() && b->first < a->first)) {
      keys.push_back((b++)->first);
    } else if (b == before.end() || a->first < b->first) {
      keys.push_back((a++)->first);
    } else {
      if (!sameButVersion(b->second, a->second)) keys.push_back(a->first);
      ++a;
      ++b;
    }
  }
  return keys;
}

}  // namespace podshaper::kube
