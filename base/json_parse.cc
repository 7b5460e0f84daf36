#include "base/json_parse.h"

#include <memory>
#include <optional>
#include <string>

#include <simdjson.h>

#include "base/json_util.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

constexpr std::size_t kReusedUpTo = 64 * 1024;

// The tree of what simdjson found; depth is bounded by the parser's max_depth.
json treeOf(simdjson::dom::element e) {
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT: {
      json object(json::value_t::object);
      auto& members = object.get_ref<json::object_t&>();
      simdjson::dom::object o = e.get_object().value_unsafe();
      for (auto [key, value] : o) {
        members.insert_or_assign(members.end(), std::string(key), treeOf(value));
      }
      return object;
    }
    case simdjson::dom::element_type::ARRAY: {
      json array(json::value_t::array);
      auto& items = array.get_ref<json::array_t&>();
      simdjson::dom::array a = e.get_array().value_unsafe();
      items.reserve(a.size());
      for (simdjson::dom::element item : a) items.push_back(treeOf(item));
      return array;
    }
    case simdjson::dom::element_type::STRING:
      return json(std::string(e.get_string().value_unsafe()));
    case simdjson::dom::element_type::INT64: {
      const int64_t v = e.get_int64().value_unsafe();
      // nlohmann keeps an integer written without a sign as unsigned.
      return v >= 0 ? json(static_cast<uint64_t>(v)) : json(v);
    }
    case simdjson::dom::element_type::UINT64:
      return json(e.get_uint64().value_unsafe());
    case simdjson::dom::element_type::DOUBLE:
      return json(e.get_double().value_unsafe());
    case simdjson::dom::element_type::BOOL:
      return json(e.get_bool().value_unsafe());
    case simdjson::dom::element_type::NULL_VALUE:
      break;
  }
  return json();
}

JsonParseError tooDeep(int maxDepth) {
  JsonParseError e;
  e.message = "nested deeper than " + std::to_string(maxDepth);
  e.tooDeep = true;
  return e;
}

JsonParseError notJson(std::string message) {
  JsonParseError e;
  e.message = std::move(message);
  return e;
}

// nlohmann's own parser: for what simdjson refused.
Result<json, JsonParseError> parseSlowly(std::string_view text, int maxDepth) {
  if (nestedDeeperThan(text, maxDepth)) return tooDeep(maxDepth);
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    return notJson("not valid JSON at byte " + std::to_string(e.byte));
  } catch (const json::exception&) {  // a number past a double's range
    return notJson("not valid JSON: a number out of range");
  }
}

// Reads JSON keeping nothing: only where it fails and why.
struct CheckOnly {
  std::optional<JsonParseError> error;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) { return true; }
  bool key(json::string_t&) { return true; }
  bool end_object() { return true; }
  bool start_array(std::size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    // What parseSlowly says of the same text: 406 is a number past a double's range.
    error = notJson(e.id == 406 ? "not valid JSON: a number out of range"
                                : "not valid JSON at byte " + std::to_string(position));
    return false;
  }
};

}  // namespace

Result<void, JsonParseError> checkJson(std::string_view text, int maxDepth) {
  if (nestedDeeperThan(text, maxDepth)) return tooDeep(maxDepth);
  CheckOnly check;
  if (json::sax_parse(text, &check) || !check.error) return {};
  return *check.error;
}

Result<json, JsonParseError> parseJson(std::string_view text, int maxDepth) {
  // simdjson's levels are nestedDeeperThan's brackets (tests/unit/base/json_parse_test.cc).
  const std::size_t depth = static_cast<std::size_t>(maxDepth);
  // simdjson's buffers take about 14 bytes per byte of text: a list page of 500 Nodes
  // (6 MB) would pass 80 MB through the heap. nlohmann builds its tree as it reads.
  // At a limit of 0 simdjson took "[]" (the list page fuzzer found it): nestedDeeperThan counts.
  if (text.size() > kReusedUpTo || maxDepth < 1) return parseSlowly(text, maxDepth);
  thread_local std::unique_ptr<simdjson::dom::parser> reused;
  if (!reused) reused = std::make_unique<simdjson::dom::parser>(kReusedUpTo);
  simdjson::dom::parser* parser = reused.get();
  if (parser->max_depth() != depth && parser->allocate(std::max<std::size_t>(parser->capacity(), 1), depth)) {
    return parseSlowly(text, maxDepth);  // no memory for simdjson's buffers
  }
  simdjson::dom::element root;
  if (parser->parse(text.data(), text.size()).get(root) != simdjson::SUCCESS) return parseSlowly(text, maxDepth);
  return treeOf(root);
}

namespace {

// Empties every object and array under `value`, deepest first, so that each is freed
// with nothing left in it for nlohmann's destructor to move.
void emptyContainers(json& value) {
  if (value.is_object()) {
    auto& members = value.get_ref<json::object_t&>();
    for (auto& [key, member] : members) {
      if (member.is_structured()) emptyContainers(member);
    }
    members.clear();
  } else if (value.is_array()) {
    auto& items = value.get_ref<json::array_t&>();
    for (json& item : items) {
      if (item.is_structured()) emptyContainers(item);
    }
    items.clear();
  }
}

}  // namespace

void freeTree(json& tree) {
  emptyContainers(tree);
  tree = nullptr;
}

}  // namespace podshaper
