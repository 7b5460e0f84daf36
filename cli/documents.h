#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"

// Kubernetes objects as users write them: YAML or JSON, several to a file.
namespace podshaper::cli {

// Whether `text` is read as JSON (its first non-blank character is `{`), not YAML.
bool isJsonText(std::string_view text);

// How a document was written, beyond its value, so that what is printed back reads as the
// input did: each object's keys in their order, each number whose text JSON's writer
// would not give back ("1e3", "0x1f", "8.0", a 30-digit integer), and the YAML collections
// written in flow style ({a: b}, [x, y]), by JSON pointer.
struct Layout {
  std::map<std::string, std::vector<std::string>> keyOrder;
  std::map<std::string, std::string> numberText;
  std::set<std::string> flow;
  // The part under `pointer` ("/request/object"), its pointers made relative to it.
  Layout under(const std::string& pointer) const;
};

// One document of a file: its value, its text as read and its layout.
struct Document {
  nlohmann::json value;
  std::string text;
  Layout layout;
};

// The documents of `text`. Text starting with `{` is one JSON document; anything else is
// a YAML stream (`---` between documents; empty ones skipped), read with YAML 1.2's core
// schema: an unquoted null, true/false, integer or float is that type (an integer past 64
// bits a float, its text kept in the layout), a quoted scalar is a string. An error names
// the line and what was wrong; nesting deeper than 128, or aliases expanding past a
// million values, is an error, not a hang.
Result<std::vector<Document>> readDocumentsAsWritten(std::string_view text);
// The same, values only.
Result<std::vector<nlohmann::json>> readDocuments(std::string_view text);

// The layout of JSON text (keys' order, numbers' text); empty where it is not JSON.
Layout jsonLayout(std::string_view text);

// `value` as a YAML document (block style), each string quoted where it would otherwise
// read back as another type ("true", "8", "1e3", "null", "") or not at all; keys and
// numbers as `layout` says where it knows them (keys it does not know after, sorted).
std::string toYaml(const nlohmann::json& value, const Layout& layout = {});
// `value` as JSON indented by two, keys and numbers likewise.
std::string toJson(const nlohmann::json& value, const Layout& layout = {});

}  // namespace podshaper::cli
