#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace podshaper {

// A step of a JsonEdit path: an object's key, or an array's index.
struct JsonStep {
  JsonStep(std::string_view k) : key(k) {}  // NOLINT: paths read as {"spec", "containers", 0}
  JsonStep(const char* k) : key(k) {}       // NOLINT
  JsonStep(const std::string& k) : key(k) {}  // NOLINT
  JsonStep(std::size_t i) : index(i), isIndex(true) {}  // NOLINT
  JsonStep(int i) : index(static_cast<std::size_t>(i)), isIndex(true) {}  // NOLINT
  std::string_view key;
  std::size_t index = 0;
  bool isIndex = false;
};
using JsonPath = std::initializer_list<JsonStep>;

// A value and its JSON text as a patch writes it (appendJson), made together once: for the
// values edits write again and again (a node requirement, a volume mount), whose text is
// most of what writing them costs.
struct JsonText {
  explicit JsonText(nlohmann::json v);
  nlohmann::json value;
  std::string text;
};

// A JSON document changed in place, each change written down, as it is made, as the JSON
// Patch (RFC 6902) operations that make it: the patch needs no copy of the document
// beforehand and no comparison afterwards (a copy and a diff of a 6 KB pod were half of
// its admission). Applied to the document as it was, the patch gives the document as it
// is. Objects missing on a path are made (one "add" of the nested value at the first
// missing one); a member that is there but not an object where a key follows (a null) is
// replaced by one. An index must be inside its array. Where the document cannot hold the
// change (a key into an array), nlohmann::json's own exception is thrown, the document and
// patch left as the change before it left them.
class JsonEdit {
 public:
  explicit JsonEdit(nlohmann::json& document);

  const nlohmann::json& document() const { return doc_; }

  // The value at `path` made `value`: nothing written when it already is; a scalar
  // "replace"d; an object or array changed with the operations json::diff would write
  // for it (base/json_diff.h); a missing one added.
  void set(JsonPath path, nlohmann::json value);
  // `value` appended to the array at `path`: one "add" at "-"; an array of it set there
  // when there is none, or something else is there.
  void append(JsonPath path, nlohmann::json value);
  // The same, its text written as made beforehand.
  void append(JsonPath path, const JsonText& value);
  // The member at `path` removed, when there is one.
  void erase(JsonPath path);

  // The operations so far as a JSON array's text; empty when there are none.
  std::string patch() const;
  bool changed() const { return !ops_.empty(); }

 private:
  // An operation's start: its op and path, the value and the closing brace to follow.
  void writeOp(const char* op, const std::string& path);
  void write(const char* op, const std::string& path, const nlohmann::json* value);
  void writeText(const char* op, const std::string& path, std::string_view valueText);
  // Walks to the array at `path`, its pointer left in pointer_: nullptr where the path is
  // missing or ends at something else.
  nlohmann::json* arrayAt(JsonPath path);

  nlohmann::json& doc_;
  std::string ops_;      // "{op},{op}"
  std::string pointer_;  // the path of the edit being made, as a JSON Pointer
};

}  // namespace podshaper
