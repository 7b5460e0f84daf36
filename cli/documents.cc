#include "cli/documents.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string_view>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "base/json_parse.h"
#include "base/json_util.h"

namespace podshaper::cli {
namespace {

using json = nlohmann::json;

constexpr int kMaxDepth = 128;
constexpr std::string_view kBom = "\xEF\xBB\xBF";  // a byte order mark some editors write first
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

// A plain scalar as the core schema types it.
json plainScalar(const std::string& s) {
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
    // Past 64 bits: a float, as JSON readers take it; the layout keeps its text.
    if (isFloat(s)) return std::strtod(s.c_str(), nullptr);
    return s;
  }
  if (oneOf(std::string(unsigned_), {".inf", ".Inf", ".INF"})) {
    return sign == "-" ? -INFINITY : INFINITY;
  }
  if (oneOf(s, {".nan", ".NaN", ".NAN"})) return NAN;
  return s;
}

// A JSON pointer's token (RFC 6901).
std::string token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

// A number's text as JSON's writer gives it back: where it differs from the input's, the
// layout keeps the input's.
void keepNumberText(const json& value, const std::string& text, const std::string& pointer, Layout& layout) {
  if (value.is_number() && value.dump() != text) layout.numberText[pointer] = text;
}

struct Converter {
  std::size_t values = 0;
  int lineOffset = 0;  // the document's first line in the file
  Layout* layout = nullptr;

  std::string where(const YAML::Mark& mark) const {
    return mark.is_null() ? std::string() : "line " + std::to_string(mark.line + lineOffset + 1) + ": ";
  }

  Result<json> convert(const YAML::Node& node, int depth, const std::string& pointer) {
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
        if (tag == "?" || tag.empty() || tag.starts_with("tag:yaml.org,2002:")) {
          json value = plainScalar(node.Scalar());
          if (layout) keepNumberText(value, node.Scalar(), pointer, *layout);
          return value;
        }
        return json(node.Scalar());  // a local tag (!foo): its text
      }
      case YAML::NodeType::Sequence: {
        if (layout && node.Style() == YAML::EmitterStyle::Flow) layout->flow.insert(pointer);
        json out = json::array();
        for (const auto& item : node) {
          auto value = convert(item, depth + 1, pointer + "/" + std::to_string(out.size()));
          if (!value) return value;
          out.push_back(std::move(*value));
        }
        return out;
      }
      case YAML::NodeType::Map: {
        json out = json::object();
        std::vector<std::string> order;
        std::vector<json> merged;  // what "<<" keys bring (YAML's merge key, which kubectl reads)
        for (const auto& entry : node) {
          if (!entry.first.IsScalar()) return makeError(where(entry.first.Mark()) + "a key that is not a string");
          const std::string& key = entry.first.Scalar();
          auto value = convert(entry.second, depth + 1, pointer + "/" + token(key));
          if (!value) return value;
          if (key == "<<" && entry.first.Tag() == "?" && (value->is_object() || value->is_array())) {
            for (json& m : value->is_array() ? *value : json::array({std::move(*value)})) {
              if (!m.is_object()) {
                return makeError(where(entry.second.Mark()) + "a merge key (<<) of something not a mapping");
              }
              merged.push_back(std::move(m));
            }
            continue;
          }
          if (!out.contains(key)) order.push_back(key);
          out[key] = std::move(*value);
        }
        for (json& m : merged) {
          for (auto& [key, value] : m.items()) {
            if (out.contains(key)) continue;  // the mapping's own keys win, then the first merged
            order.push_back(key);
            out[key] = std::move(value);
          }
        }
        if (layout) {
          layout->keyOrder[pointer] = std::move(order);
          if (node.Style() == YAML::EmitterStyle::Flow) layout->flow.insert(pointer);
        }
        return out;
      }
    }
    return json(nullptr);
  }
};

// A YAML stream cut into its documents' texts, each with its first line: a document
// starts at a line that begins with "---" (a marker line cannot occur inside a document's
// content, not even in a block scalar).
struct Piece {
  std::string text;
  int firstLine = 0;
};

bool isMarker(std::string_view line, std::string_view marker) {
  return line.starts_with(marker) &&
         (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r' || line[3] == '\n');
}

// Whether a piece holds nothing but blank and comment lines, directives and document
// markers (with at most a comment after them).
bool onlyComments(std::string_view text) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    end = end == std::string_view::npos ? text.size() : end + 1;
    std::string_view l = text.substr(start, end - start);
    start = end;
    if (isMarker(l, "---") || isMarker(l, "...")) l.remove_prefix(3);
    else if (l.starts_with('%')) continue;
    const std::size_t first = l.find_first_not_of(" \t\r\n");
    if (first != std::string_view::npos && l[first] != '#') return false;
  }
  return true;
}

std::vector<Piece> piecesOf(std::string_view text) {
  std::vector<Piece> pieces(1);
  int line = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    end = end == std::string_view::npos ? text.size() : end + 1;
    std::string_view l = text.substr(start, end - start);
    if (isMarker(l, "---") && !pieces.back().text.empty()) pieces.push_back(Piece{"", line});
    pieces.back().text += l;
    if (isMarker(l, "...")) pieces.push_back(Piece{"", line + 1});
    start = end;
    ++line;
  }
  return pieces;
}

// Whether a string written plain would be read back as something else: by YAML 1.2's core
// schema (podshaper's reader), or by YAML 1.1, which kubectl reads (yes/no/on/off/y/n as
// booleans; 0b101, 0777, 1_000, 60:30 and dates as numbers or times): anything that
// starts like a number and holds only what numbers are written with is quoted.
bool readsAsOtherType(const std::string& s) {
  if (s.empty()) return true;
  if (!plainScalar(s).is_string()) return true;
  if (oneOf(s, {"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF", "=",
                "<<"})) {
    return true;
  }
  const bool numberLike = std::string_view("+-.0123456789").find(s[0]) != std::string_view::npos &&
                          allOf(s, [](int c) {
                            return std::isxdigit(c) != 0 ||
                                   std::string_view("xXoObB_:.+-eE ").find(static_cast<char>(c)) != std::string_view::npos;
                          });
  return numberLike;
}

// The keys of the object at `pointer`: in the layout's order where it knows them, then the
// others (those podshaper added) sorted.
std::vector<std::string> keysOf(const json& object, const std::string& pointer, const Layout& layout) {
  std::vector<std::string> keys;
  if (auto order = layout.keyOrder.find(pointer); order != layout.keyOrder.end()) {
    for (const auto& k : order->second) {
      if (object.contains(k)) keys.push_back(k);
    }
  }
  for (const auto& [k, _] : object.items()) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  return keys;
}

// A number as written, where the layout keeps its text and the value is still the one read.
std::optional<std::string> numberText(const json& value, const std::string& pointer, const Layout& layout) {
  auto text = layout.numberText.find(pointer);
  if (text == layout.numberText.end() || !value.is_number()) return std::nullopt;
  const char* begin = text->second.c_str();
  char* end = nullptr;
  double read = std::strtod(begin, &end);
  bool same = end == begin + text->second.size() ? read == value.get<double>()
                                                 : plainScalar(text->second) == value;  // 0x1f, 0o17
  return same ? std::optional<std::string>(text->second) : std::nullopt;
}

// What yaml-cpp would write plain and YAML would not read back: a carriage return (a line
// break to YAML), space or tab at either end (trimmed from a plain scalar), "---" or "..."
// first.
bool needsQuotes(const std::string& s) {
  auto blank = [](char c) { return c == ' ' || c == '\t'; };
  return s.find('\r') != std::string::npos || (!s.empty() && (blank(s.front()) || blank(s.back()))) ||
         s.starts_with("---") || s.starts_with("...");  // a document marker where it starts a line
}

// DEL (0x7f), which yaml-cpp writes as it is even in double quotes, and YAML does not read.
bool hasDelete(const std::string& s) { return s.find('\x7f') != std::string::npos; }

// Whether a key or string in `value` holds a DEL: written in block style then (yaml-cpp's
// flow writer cannot escape it).
bool holdsDelete(const json& value) {
  if (value.is_string()) return hasDelete(value.get_ref<const std::string&>());
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      if (hasDelete(key) || holdsDelete(child)) return true;
    }
  } else if (value.is_array()) {
    for (const auto& child : value) {
      if (holdsDelete(child)) return true;
    }
  }
  return false;
}

// `s` double-quoted with every control character and DEL escaped.
std::string escaped(const std::string& s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Lines of text, as a block scalar: ending in a newline, starting with neither a space nor
// an empty line (which would need an indentation indicator) and holding no control
// character but the newlines.
bool isLiteral(const std::string& s) {
  if (s.empty() || s.back() != '\n' || s.front() == ' ' || s.front() == '\n') return false;
  // NEL, LINE SEPARATOR and PARAGRAPH SEPARATOR break lines for YAML 1.1; a BOM is not text.
  for (std::string_view breaks : {"\xC2\x85", "\xE2\x80\xA8", "\xE2\x80\xA9", "\xEF\xBB\xBF"}) {
    if (s.find(breaks) != std::string::npos) return false;
  }
  return std::none_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\n') || u == 0x7f;
  });
}

// `s` as a literal block scalar, its lines `indent` in: "|", or "|+" to keep more than one
// final newline.
std::string literal(const std::string& s, std::size_t indent) {
  std::string out = s.size() >= 2 && s[s.size() - 2] == '\n' ? "|+" : "|";
  std::size_t start = 0;
  while (start < s.size()) {
    const std::size_t end = s.find('\n', start);
    out += "\n";
    if (end > start) out += std::string(indent, ' ') + s.substr(start, end - start);
    start = end + 1;
  }
  return out;
}

// A scalar as YAML writes it: a block scalar for lines of text, else as yaml-cpp writes
// it (quoted and escaped where it must be).
std::string scalarText(const json& value, const std::string& pointer, const Layout& layout, std::size_t indent) {
  YAML::Emitter out;
  switch (value.type()) {
    case json::value_t::string: {
      const auto& s = value.get_ref<const std::string&>();
      if (isLiteral(s)) return literal(s, indent);
      if (hasDelete(s)) return escaped(s);
      if (readsAsOtherType(s) || needsQuotes(s)) out << YAML::DoubleQuoted;
      out << s;
      break;
    }
    case json::value_t::null:
      out << YAML::Null;
      break;
    default:
      // Numbers and booleans: as written, else as JSON writes them.
      return numberText(value, pointer, layout).value_or(value.dump());
  }
  return out.c_str();
}

// A key as Kubernetes names them (nvidia.com/gpu, app.kubernetes.io/name) is written plain;
// any other double-quoted, never as a block scalar.
std::string keyText(const std::string& key) {
  const bool plain = !key.empty() && (std::isalnum(static_cast<unsigned char>(key[0])) || key[0] == '_') &&
                     std::all_of(key.begin(), key.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_./-").find(c) !=
                                                                                   std::string_view::npos;
                     }) &&
                     !readsAsOtherType(key);
  if (plain) return key;
  if (hasDelete(key)) return escaped(key);
  YAML::Emitter out;
  out << YAML::DoubleQuoted << key;
  return out.c_str();
}

bool isEmptyCollection(const json& value) { return value.is_structured() && value.empty(); }

// A collection in flow style, as the input wrote it ({a: b}, [x, y]): yaml-cpp quotes what
// flow style needs quoted (",", "[", "{").
void emitFlow(YAML::Emitter& out, const json& value, const std::string& pointer, const Layout& layout) {
  if (value.is_object()) {
    out << YAML::Flow << YAML::BeginMap;
    for (const auto& key : keysOf(value, pointer, layout)) {
      out << YAML::Key;
      if (readsAsOtherType(key)) out << YAML::DoubleQuoted;
      out << key << YAML::Value;
      emitFlow(out, value[key], pointer + "/" + token(key), layout);
    }
    out << YAML::EndMap;
  } else if (value.is_array()) {
    out << YAML::Flow << YAML::BeginSeq;
    for (std::size_t i = 0; i < value.size(); ++i) emitFlow(out, value[i], pointer + "/" + std::to_string(i), layout);
    out << YAML::EndSeq;
  } else if (value.is_string()) {
    const auto& s = value.get_ref<const std::string&>();
    if (readsAsOtherType(s) || needsQuotes(s) || s.find('\n') != std::string::npos) out << YAML::DoubleQuoted;
    out << s;
  } else if (value.is_null()) {
    out << YAML::Null;
  } else {
    out << numberText(value, pointer, layout).value_or(value.dump());
  }
}

std::string flowText(const json& value, const std::string& pointer, const Layout& layout) {
  YAML::Emitter out;
  emitFlow(out, value, pointer, layout);
  return out.c_str();
}

// Block style as kubectl writes it: a mapping's members two spaces in, a sequence's items
// at its key's column ("- " then the item), empty collections in flow style.
void emit(std::string& out, const json& value, const std::string& pointer, const Layout& layout, std::size_t indent,
          bool inlineFirst) {
  const std::string pad(indent, ' ');
  if (value.is_object() && !value.empty()) {
    bool first = true;
    for (const auto& key : keysOf(value, pointer, layout)) {
      const json& child = value[key];
      const std::string at = pointer + "/" + token(key);
      if (!(first && inlineFirst)) out += pad;
      first = false;
      // A key of more than 1024 characters cannot be implicit: "? key", then ": value".
      const std::string keyWritten = keyText(key);
      const bool explicitKey = keyWritten.size() > 1000;
      out += explicitKey ? "? " + keyWritten + "\n" + pad + ":" : keyWritten + ":";
      if (!child.empty() && layout.flow.contains(at) && !holdsDelete(child)) {
        out += " " + flowText(child, at, layout) + "\n";
      } else if (child.is_object() && !child.empty()) {
        out += "\n";
        emit(out, child, at, layout, indent + 2, false);
      } else if (child.is_array() && !child.empty()) {
        out += "\n";
        emit(out, child, at, layout, explicitKey ? indent + 2 : indent, false);
      } else {
        out += " " + (isEmptyCollection(child) ? std::string(child.is_object() ? "{}" : "[]")
                                               : scalarText(child, at, layout, indent + 2)) + "\n";
      }
    }
  } else if (value.is_array() && !value.empty()) {
    for (std::size_t i = 0; i < value.size(); ++i) {
      const json& item = value[i];
      const std::string at = pointer + "/" + std::to_string(i);
      if (!(i == 0 && inlineFirst)) out += pad;
      out += "- ";
      if (item.is_structured() && !item.empty() && layout.flow.contains(at) && !holdsDelete(item)) {
        out += flowText(item, at, layout) + "\n";
      } else if (item.is_structured() && !item.empty()) {
        emit(out, item, at, layout, indent + 2, true);
      } else {
        out += (isEmptyCollection(item) ? std::string(item.is_object() ? "{}" : "[]")
                                        : scalarText(item, at, layout, indent + 2)) + "\n";
      }
    }
  } else {
    out += pad + (isEmptyCollection(value) ? std::string(value.is_object() ? "{}" : "[]")
                                           : scalarText(value, pointer, layout, indent + 2)) + "\n";
  }
}

// JSON's number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?. A YAML number's
// text may not be one ("0x1f", "+5", ".5", "08"): JSON output writes those anew.
bool isJsonNumber(std::string_view s) {
  std::size_t i = 0;
  auto digits = [&] {
    const std::size_t from = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return i - from;
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (i < s.size() && s[i] == '0') {
    ++i;
  } else if (digits() == 0) {
    return false;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (digits() == 0) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

void writeJson(std::string& out, const json& value, const std::string& pointer, const Layout& layout, int indent) {
  const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
  if (value.is_object() && !value.empty()) {
    out += "{\n";
    bool first = true;
    for (const auto& key : keysOf(value, pointer, layout)) {
      out += (first ? "" : ",\n") + pad + json(key).dump() + ": ";
      writeJson(out, value[key], pointer + "/" + token(key), layout, indent + 2);
      first = false;
    }
    out += "\n" + std::string(static_cast<std::size_t>(indent), ' ') + "}";
  } else if (value.is_array() && !value.empty()) {
    out += "[\n";
    for (std::size_t i = 0; i < value.size(); ++i) {
      out += (i ? ",\n" : "") + pad;
      writeJson(out, value[i], pointer + "/" + std::to_string(i), layout, indent + 2);
    }
    out += "\n" + std::string(static_cast<std::size_t>(indent), ' ') + "]";
  } else {
    auto text = numberText(value, pointer, layout);
    out += text && isJsonNumber(*text) ? *text : value.dump();
  }
}

// Records the layout of JSON text as nlohmann's reader walks it.
class LayoutReader : public nlohmann::json_sax<json> {
 public:
  explicit LayoutReader(Layout& layout) : layout_(layout) {}
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t v, const string_t& text) override {
    keepNumberText(json(v), text, here(), layout_);
    return value();
  }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override {
    const std::string at = here();
    frames_.push_back({false, 0, "", at});
    layout_.keyOrder[at];
    return true;
  }
  bool key(string_t& k) override {
    frames_.back().key = k;
    auto& order = layout_.keyOrder[frames_.back().pointer];
    if (std::find(order.begin(), order.end(), k) == order.end()) order.push_back(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override {
    frames_.push_back({true, 0, "", here()});
    return true;
  }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  struct Frame {
    bool array;
    std::size_t next;
    std::string key, pointer;
  };
  std::string here() const {
    if (frames_.empty()) return "";
    const Frame& f = frames_.back();
    return f.pointer + "/" + (f.array ? std::to_string(f.next) : token(f.key));
  }
  bool value() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().next;
    return true;
  }
  bool close() {
    frames_.pop_back();
    return value();
  }
  Layout& layout_;
  std::vector<Frame> frames_;
};

// The first line (from 1) holding bytes that are not UTF-8; JSON, and so every object, is
// UTF-8 text. (nlohmann's writer checks it, and throws where it fails.)
std::optional<int> firstLineNotUtf8(std::string_view text) {
  auto valid = [](std::string_view t) {
    try {
      (void)json(std::string(t)).dump();
      return true;
    } catch (const json::type_error&) {
      return false;
    }
  };
  if (valid(text)) return std::nullopt;
  int line = 1;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    end = end == std::string_view::npos ? text.size() : end;
    if (!valid(text.substr(start, end - start))) return line;
    start = end + 1;
    ++line;
  }
  return line;
}

// yaml-cpp 0.7's LoadAll never ends on some invalid streams ("{a: b}, c"): its parser makes
// an empty document at the same place again and again, and the list of them grows until
// memory runs out. The documents are walked first, and where one starts where the one
// before did, that place is returned.
class DocumentStarts : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
  YAML::Mark start = YAML::Mark::null_mark();
};

std::optional<YAML::Mark> endlessAt(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts starts;
  int before = -1;
  while (parser.HandleNextDocument(starts)) {
    if (starts.start.pos == before) return starts.start;
    before = starts.start.pos;
  }
  return std::nullopt;
}

}  // namespace

Layout Layout::under(const std::string& pointer) const {
  Layout out;
  auto take = [&](const auto& from, auto& to) {
    for (auto it = from.lower_bound(pointer); it != from.end() && it->first.starts_with(pointer); ++it) {
      const std::string rest = it->first.substr(pointer.size());
      if (rest.empty() || rest.front() == '/') to[rest] = it->second;
    }
  };
  take(keyOrder, out.keyOrder);
  take(numberText, out.numberText);
  for (auto it = flow.lower_bound(pointer); it != flow.end() && it->starts_with(pointer); ++it) {
    const std::string rest = it->substr(pointer.size());
    if (rest.empty() || rest.front() == '/') out.flow.insert(rest);
  }
  return out;
}

bool isJsonText(std::string_view text) {
  if (text.starts_with(kBom)) text.remove_prefix(kBom.size());
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && text[first] == '{';
}

Layout jsonLayout(std::string_view text) {
  Layout layout;
  LayoutReader reader(layout);
  if (!json::sax_parse(text, &reader)) return Layout{};
  return layout;
}

Result<std::vector<Document>> readDocumentsAsWritten(std::string_view text) {
  if (text.starts_with(kBom)) text.remove_prefix(kBom.size());
  if (auto bom = text.find(kBom); bom != std::string_view::npos) {
    return makeError("line " + std::to_string(1 + std::count(text.begin(), text.begin() + bom, '\n')) +
                     ": a byte order mark inside the text (one is read only as its first bytes)");
  }
  if (isJsonText(text)) {
    auto parsed = JsonReader().read(text, kMaxDepth);
    if (!parsed) return makeError((parsed.error().tooDeep ? "JSON " : "") + parsed.error().message);
    return std::vector<Document>{Document{std::move(*parsed), std::string(text), jsonLayout(text)}};
  }
  if (auto bad = firstLineNotUtf8(text)) {
    return makeError("line " + std::to_string(*bad) + ": not UTF-8 (YAML is UTF-8 text)");
  }
  // YAML is printable text: a control character (a NUL among them, which also makes
  // yaml-cpp read the bytes as UTF-16 or UTF-32) is refused, not read as something else.
  if (auto c = std::find_if(text.begin(), text.end(), [](char ch) {
        const auto u = static_cast<unsigned char>(ch);
        return (u < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') || u == 0x7f;
      });
      c != text.end()) {
    static constexpr char kHex[] = "0123456789abcdef";
    const auto u = static_cast<unsigned char>(*c);
    return makeError("line " + std::to_string(1 + std::count(text.begin(), c, '\n')) + ": a control character (0x" +
                     kHex[u >> 4] + kHex[u & 15] + "): YAML is printable text");
  }
  std::vector<Document> docs;
  Converter converter;
  std::string carried;  // pieces with no document (comments, "...", a directive): kept with the next
  for (Piece& piece : piecesOf(text)) {
    converter.lineOffset = piece.firstLine;
    std::vector<YAML::Node> nodes;
    try {
      if (auto stuck = endlessAt(piece.text)) {
        return makeError(converter.where(*stuck) + "not valid YAML: text after the end of a document (a flow "
                         "collection followed by more on its line?)");
      }
      nodes = YAML::LoadAll(piece.text);
    } catch (const YAML::Exception& e) {
      return makeError(converter.where(e.mark) + "not valid YAML: " + e.msg);
    }
    // One document a piece, but for a "---" inside a flow scalar, which is read as a whole.
    const bool whole = nodes.size() == 1 && !nodes.front().IsNull();
    if (whole) {
      piece.text = std::move(carried) + piece.text;
      carried.clear();
    } else if (std::none_of(nodes.begin(), nodes.end(), [](const YAML::Node& n) { return !n.IsNull(); }) &&
               onlyComments(piece.text)) {
      // Only what is not content is carried: a null document's own text (a tag or an
      // anchor, "!1") put before the next one would make it another document.
      carried += piece.text;
    }
    for (const auto& node : nodes) {
      if (node.IsNull()) continue;
      Document doc;
      converter.layout = &doc.layout;
      auto value = converter.convert(node, 0, "");
      if (!value) return value.error();
      doc.value = std::move(*value);
      if (whole) doc.text = piece.text;
      docs.push_back(std::move(doc));
    }
  }
  if (!docs.empty() && !docs.back().text.empty()) docs.back().text += carried;  // what follows the last
  return docs;
}

Result<std::vector<json>> readDocuments(std::string_view text) {
  auto docs = readDocumentsAsWritten(text);
  if (!docs) return docs.error();
  std::vector<json> values;
  for (auto& d : *docs) values.push_back(std::move(d.value));
  return values;
}

// A document is written in block style even where its input was flow: text starting with
// "{" is read as JSON (isJsonText).
std::string toYaml(const json& value, const Layout& layout) {
  std::string out;
  emit(out, value, "", layout, 0, false);
  return out;
}

std::string toJson(const json& value, const Layout& layout) {
  std::string out;
  writeJson(out, value, "", layout, 0);
  return out + "\n";
}

}  // namespace podshaper::cli
