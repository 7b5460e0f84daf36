#include "cli/documents.h"

#include <cmath>
#include <regex>

#include <yaml-cpp/yaml.h>

#include "base/json_util.h"

namespace podshaper::cli {
namespace {

using json = nlohmann::json;

constexpr int kMaxDepth = 128;
constexpr std::size_t kMaxValues = 1'000'000;

// YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution).
const std::regex kNull("null|Null|NULL|~|");
const std::regex kTrue("true|True|TRUE");
const std::regex kFalse("false|False|FALSE");
const std::regex kDecimal("[-+]?[0-9]+");
const std::regex kOctal("0o[0-7]+");
const std::regex kHex("0x[0-9a-fA-F]+");
const std::regex kFloat("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
const std::regex kInfinity("[-+]?\\.(inf|Inf|INF)");
const std::regex kNotANumber("\\.nan|\\.NaN|\\.NAN");

// A plain scalar as the core schema types it; an integer past 64 bits stays text.
json plainScalar(const std::string& s) {
  if (s.size() > 64) return s;  // no number is longer; and std::regex recurses per character
  if (std::regex_match(s, kNull)) return nullptr;
  if (std::regex_match(s, kTrue)) return true;
  if (std::regex_match(s, kFalse)) return false;
  try {
    if (std::regex_match(s, kDecimal)) {
      if (s[0] == '-') return std::stoll(s);
      return std::stoull(s[0] == '+' ? s.substr(1) : s);
    }
    if (std::regex_match(s, kOctal)) return std::stoull(s.substr(2), nullptr, 8);
    if (std::regex_match(s, kHex)) return std::stoull(s.substr(2), nullptr, 16);
    if (std::regex_match(s, kFloat)) return std::stod(s);
  } catch (const std::out_of_range&) {
    return s;
  }
  if (std::regex_match(s, kInfinity)) return s[0] == '-' ? -INFINITY : INFINITY;
  if (std::regex_match(s, kNotANumber)) return NAN;
  return s;
}

std::string where(const YAML::Mark& mark) {
  return mark.is_null() ? std::string() : "line " + std::to_string(mark.line + 1) + ": ";
}

struct Converter {
  std::size_t values = 0;

  Result<json> convert(const YAML::Node& node, int depth) {
    if (++values > kMaxValues) {
      return makeError(where(node.Mark()) + "more than a million values (aliases expanding?)");
    }
    if (depth > kMaxDepth) return makeError(where(node.Mark()) + "nested deeper than " + std::to_string(kMaxDepth));
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        return json(nullptr);
      case YAML::NodeType::Scalar: {
        const std::string& tag = node.Tag();
        if (tag == "!" || tag == "tag:yaml.org,2002:str") return json(node.Scalar());
        if (tag == "?" || tag.empty() || tag.starts_with("tag:yaml.org,2002:")) return plainScalar(node.Scalar());
        return json(node.Scalar());  // a local tag (!foo): its text
      }
      case YAML::NodeType::Sequence: {
        json out = json::array();
        for (const auto& item : node) {
          auto value = convert(item, depth + 1);
          if (!value) return value;
          out.push_back(std::move(*value));
        }
        return out;
      }
      case YAML::NodeType::Map: {
        json out = json::object();
        for (const auto& entry : node) {
          if (!entry.first.IsScalar()) return makeError(where(entry.first.Mark()) + "a key that is not a string");
          auto value = convert(entry.second, depth + 1);
          if (!value) return value;
          out[entry.first.Scalar()] = std::move(*value);
        }
        return out;
      }
    }
    return json(nullptr);
  }
};

bool readsAsOtherType(const std::string& s) {
  if (s.empty()) return true;
  if (!plainScalar(s).is_string()) return true;
  return false;
}

void emit(YAML::Emitter& out, const json& value) {
  switch (value.type()) {
    case json::value_t::object:
      if (value.empty()) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        return;
      }
      out << YAML::BeginMap;
      for (const auto& [key, child] : value.items()) {
        out << YAML::Key;
        if (readsAsOtherType(key)) out << YAML::DoubleQuoted;
        out << key << YAML::Value;
        emit(out, child);
      }
      out << YAML::EndMap;
      return;
    case json::value_t::array:
      if (value.empty()) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        return;
      }
      out << YAML::BeginSeq;
      for (const auto& child : value) emit(out, child);
      out << YAML::EndSeq;
      return;
    case json::value_t::string: {
      const auto& s = value.get_ref<const std::string&>();
      if (s.find('\n') != std::string::npos && s.find_first_of("\t\r") == std::string::npos && s.back() == '\n') {
        out << YAML::Literal << s;
      } else {
        if (readsAsOtherType(s)) out << YAML::DoubleQuoted;
        out << s;
      }
      return;
    }
    case json::value_t::null:
      out << YAML::Null;
      return;
    default:
      out << value.dump();  // numbers and booleans, as JSON writes them
      return;
  }
}

}  // namespace

Result<std::vector<json>> readDocuments(std::string_view text) {
  std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '{') {
    if (nestedDeeperThan(text, kMaxDepth)) return makeError("JSON nested deeper than " + std::to_string(kMaxDepth));
    try {
      return std::vector<json>{json::parse(text)};
    } catch (const json::parse_error& e) {
      return makeError("not valid JSON at byte " + std::to_string(e.byte));
    }
  }
  std::vector<YAML::Node> nodes;
  try {
    nodes = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    return makeError(where(e.mark) + "not valid YAML: " + e.msg);
  }
  std::vector<json> docs;
  Converter converter;
  for (const auto& node : nodes) {
    if (node.IsNull()) continue;
    auto doc = converter.convert(node, 0);
    if (!doc) return doc.error();
    docs.push_back(std::move(*doc));
  }
  return docs;
}

std::string toYaml(const json& value) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  emit(out, value);
  return std::string(out.c_str()) + "\n";
}

}  // namespace podshaper::cli
