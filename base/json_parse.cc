#include "base/json_parse.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <simdjson.h>

#include "base/json_util.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

// How many members a refilled object's next key may pass over to meet its own in order:
// a bound, so that keys in an order made to defeat it cost a search each, not a walk.
constexpr int kPassUpTo = 4;

// A JsonReader's lists that fillTree fills and empties again (its hits_ and passed_).
using Hits = std::vector<const json*>;
using Passed = std::vector<json::object_t::iterator>;

// Erases the members of a refilled object whose keys the text does not have.
void eraseStale(json::object_t& members, simdjson::dom::object text) {
  for (auto it = members.begin(); it != members.end();) {
    simdjson::dom::element unused;
    if (text.at_key(it->first).get(unused) == simdjson::SUCCESS) ++it;
    else it = members.erase(it);
  }
}

// The key comparisons of an object's refill, out of line: fillTree recurses once for each
// level a text nests, and what it keeps on the stack is what a deeply nested text costs
// (under AddressSanitizer every local with red zones around it: about 8 KiB a level, and
// watch lines are read up to 1,000 levels deep, kube/protocol). Inline, the comparisons'
// locals made the frame a tenth larger.
[[gnu::noinline]] int compareKeysApart(std::string_view a, std::string_view b) { return compareKeys(a, b); }
[[gnu::noinline]] json::object_t::iterator findMemberApart(json::object_t& members, std::string_view key) {
  return findMember(members, key);
}

// `out` made the tree of what simdjson found, built where it lies: each member and item is
// made in its place and filled there, and what `out` held is filled again rather than
// freed and made anew: a member of the same key, an item at the same place, a string's
// buffer. Depth is bounded by the parser's max_depth.
void fillTree(json& out, simdjson::dom::element e, Hits& hits, Passed& passed) {
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT: {
      simdjson::dom::object o = e.get_object().value_unsafe();
      if (!out.is_object()) out = json::value_t::object;
      auto& members = *out.get_ptr<json::object_t*>();
      if (members.empty()) {
        for (auto [key, value] : o) {
          // In the text's order; a key seen before is filled again: the last one wins.
          auto at = members.emplace_hint(members.end(), std::piecewise_construct, std::forward_as_tuple(key),
                                         std::forward_as_tuple());
          fillTree(at->second, value, hits, passed);
        }
        return;
      }
      const std::size_t base = hits.size(), passedBase = passed.size();
      auto next = members.begin();  // where the key after the last one met would be
      bool inOrder = true;          // every key so far met its member at or a few after `next`
      for (auto [key, value] : o) {
        // Keys in sorted order (Go writes a map so, and many a struct) meet their member at
        // `next`, or a few members on: those passed are ones the text lacks (what shaping
        // added to the review before) while the keys stay in order. Others are looked for.
        auto at = next;
        int order = 1;
        if (inOrder) {
          for (int n = 0; at != members.end() && (order = compareKeysApart(at->first, key)) < 0; ++n, ++at) {
            if (n == kPassUpTo) break;
            passed.push_back(at);
          }
        }
        if (at == members.end() || order != 0) {
          inOrder = false;
          at = findMemberApart(members, key);
          if (at == members.end()) {
            at = members.emplace_hint(at, std::piecewise_construct, std::forward_as_tuple(key),
                                      std::forward_as_tuple());
          }
        }
        hits.push_back(&at->second);
        fillTree(at->second, value, hits, passed);
        next = std::next(at);
      }
      if (inOrder) {  // each member met once, in order: those passed and those after, the text lacks
        for (auto it = passed.begin() + static_cast<std::ptrdiff_t>(passedBase); it != passed.end(); ++it) {
          members.erase(*it);
        }
        members.erase(next, members.end());
        passed.resize(passedBase);
        hits.resize(base);
        return;
      }
      passed.resize(passedBase);
      // The members the text does not have go: there are some unless every member was met
      // (a key twice in the text is met twice).
      bool stale = hits.size() - base < members.size();
      if (!stale) {
        std::sort(hits.begin() + static_cast<std::ptrdiff_t>(base), hits.end());
        const auto met = std::unique(hits.begin() + static_cast<std::ptrdiff_t>(base), hits.end());
        stale = static_cast<std::size_t>(met - hits.begin()) - base < members.size();
      }
      hits.resize(base);
      if (stale) eraseStale(members, o);
      return;
    }
    case simdjson::dom::element_type::ARRAY: {
      if (!out.is_array()) out = json::value_t::array;
      auto& items = *out.get_ptr<json::array_t*>();
      simdjson::dom::array a = e.get_array().value_unsafe();
      items.resize(a.size());
      std::size_t i = 0;
      for (simdjson::dom::element item : a) fillTree(items[i++], item, hits, passed);
      return;
    }
    case simdjson::dom::element_type::STRING: {
      const std::string_view text = e.get_string().value_unsafe();
      if (!out.is_string()) out = json::value_t::string;
      out.get_ptr<json::string_t*>()->assign(text.data(), text.size());
      return;
    }
    case simdjson::dom::element_type::INT64: {
      const int64_t v = e.get_int64().value_unsafe();
      // nlohmann keeps an integer written without a sign as unsigned.
      if (v >= 0) out = static_cast<uint64_t>(v);
      else out = v;
      return;
    }
    case simdjson::dom::element_type::UINT64:
      out = e.get_uint64().value_unsafe();
      return;
    case simdjson::dom::element_type::DOUBLE:
      out = e.get_double().value_unsafe();
      return;
    case simdjson::dom::element_type::BOOL:
      out = e.get_bool().value_unsafe();
      return;
    case simdjson::dom::element_type::NULL_VALUE:
      out = nullptr;
      return;
  }
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

JsonReader::JsonReader() = default;
JsonReader::~JsonReader() = default;
JsonReader::JsonReader(JsonReader&&) noexcept = default;
JsonReader& JsonReader::operator=(JsonReader&&) noexcept = default;

Result<void, JsonParseError> JsonReader::into(json& tree, std::string_view text, int maxDepth) {
  // simdjson's levels are nestedDeeperThan's brackets (tests/unit/base/json_parse_test.cc).
  const std::size_t depth = static_cast<std::size_t>(maxDepth);
  auto slowly = [&]() -> Result<void, JsonParseError> {
    auto parsed = parseSlowly(text, maxDepth);
    freeTree(tree);
    if (!parsed) return parsed.error();
    tree = std::move(*parsed);
    return {};
  };
  // simdjson's buffers take about 14 bytes per byte of text: a list page of 500 Nodes
  // (6 MB) would pass 80 MB through the heap. nlohmann builds its tree as it reads.
  // At a limit of 0 simdjson took "[]" (the list page fuzzer found it): nestedDeeperThan counts.
  if (text.size() > kSimdjsonReadsUpTo || maxDepth < 1) return slowly();
  if (!parser_) parser_ = std::make_unique<simdjson::dom::parser>(kSimdjsonReadsUpTo);
  simdjson::dom::parser* parser = parser_.get();
  if (parser->max_depth() != depth && parser->allocate(std::max<std::size_t>(parser->capacity(), 1), depth)) {
    return slowly();  // no memory for simdjson's buffers
  }
  simdjson::dom::element root;
  if (parser->parse(text.data(), text.size()).get(root) != simdjson::SUCCESS) return slowly();
  fillTree(tree, root, hits_, passed_);
  return {};
}

Result<json, JsonParseError> JsonReader::read(std::string_view text, int maxDepth) {
  json tree;
  if (auto read = into(tree, text, maxDepth); !read) return read.error();
  return tree;
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
