#include "cli/documents.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <initializer_list>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "base/json_parse.h"
#include "base/json_util.h"

namespace podshaper::cli {
namespace {

using json = nlohmann::json;

constexpr int kMaxDepth = 128;
constexpr std::size_t kMaxValues = 1'000'000;

// YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution), by hand:
// std::regex recurses per character and trips GCC's sanitizer build.
bool oneOf(const std::string& s, std::initializer_list<const char*> words) {
  return std::any_of(words.begin(), words.end(), [&](const char* w) { return s == w; });
}

template <class Test>
bool allOf(std::string_view s, Test is) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [&is](char c) { return is(static_cast<unsigned char>(c)); });
}

bool isOctalDigit(int c) { return c >= '0' && c <= '7'; }
bool isDecimalDigit(int c) { return std::isdigit(c) != 0; }
bool isHexDigit(int c) { return std::isxdigit(c) != 0; }

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool isFloat(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  std::size_t i = 0, digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    std::size_t fraction = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++fraction;
    if (digits == 0 && fraction == 0) return false;
  } else if (digits == 0) {
    return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    std::size_t exponent = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++exponent;
    if (exponent == 0) return false;
  }
  return i == s.size();
}

// A plain scalar as the core schema types it; an integer past 64 bits stays text.
json plainScalar(const std::string& s) {
  if (s.size() > 64) return s;  // no number is longer
  if (oneOf(s, {"null", "Null", "NULL", "~", ""})) return nullptr;
  if (oneOf(s, {"true", "True", "TRUE"})) return true;
  if (oneOf(s, {"false", "False", "FALSE"})) return false;
  const std::string_view sign = s.empty() ? std::string_view() : std::string_view(s).substr(0, 1);
  const std::string_view unsigned_ = (sign == "-" || sign == "+") ? std::string_view(s).substr(1) : std::string_view(s);
  try {
    if (allOf(unsigned_, isDecimalDigit)) {
      if (sign == "-") return std::stoll(s);
      return std::stoull(std::string(unsigned_));
    }
    if (s.starts_with("0o") && allOf(std::string_view(s).substr(2), isOctalDigit)) {
      return std::stoull(s.substr(2), nullptr, 8);
    }
    if (s.starts_with("0x") && allOf(std::string_view(s).substr(2), isHexDigit)) {
      return std::stoull(s.substr(2), nullptr, 16);
    }
    if (isFloat(s)) return std::stod(s);
  } catch (const std::out_of_range&) {
    return s;
  }
  if (oneOf(std::string(unsigned_), {".inf", ".Inf", ".INF"})) {
    return sign == "-" ? -INFINITY : INFINITY;
  }
  if (oneOf(s, {".nan", ".NaN", ".NAN"})) return NAN;
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

bool isJsonText(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && text[first] == '{';
}

Result<std::vector<json>> readDocuments(std::string_view text) {
  if (isJsonText(text)) {
    auto parsed = parseJson(text, kMaxDepth);
    if (!parsed) return makeError((parsed.error().tooDeep ? "JSON " : "") + parsed.error().message);
    return std::vector<json>{std::move(*parsed)};
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
