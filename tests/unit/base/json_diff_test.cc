#include "base/json_diff.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace podshaper {
namespace {

using nlohmann::json;

// A random tree of a few levels: objects with keys that need escaping, arrays, scalars.
json randomTree(std::mt19937& rng, int depth) {
  const char* keys[] = {"a", "b", "env", "x/y", "~t", "name", "value", ""};
  switch (depth <= 0 ? rng() % 4 : rng() % 6) {
    case 0: return nullptr;
    case 1: return static_cast<int>(rng() % 5);
    case 2: return std::string(1, static_cast<char>('p' + rng() % 3));
    case 3: return rng() % 2 == 0;
    case 4: {
      json a = json::array();
      for (unsigned n = rng() % 5; n > 0; --n) a.push_back(randomTree(rng, depth - 1));
      return a;
    }
    default: {
      json o = json::object();
      for (unsigned n = rng() % 5; n > 0; --n) o[keys[rng() % 8]] = randomTree(rng, depth - 1);
      return o;
    }
  }
}

// Changes some nodes of `tree`: replaced, removed, added, or left.
void mutate(json& tree, std::mt19937& rng, int depth) {
  if (tree.is_object()) {
    std::vector<std::string> keys;
    for (auto it = tree.begin(); it != tree.end(); ++it) keys.push_back(it.key());
    for (const auto& k : keys) {
      switch (rng() % 6) {
        case 0: tree.erase(k); break;
        case 1: tree[k] = randomTree(rng, depth); break;
        case 2: mutate(tree[k], rng, depth - 1); break;
        default: break;
      }
    }
    if (rng() % 3 == 0) tree["added/" + std::to_string(rng() % 3)] = randomTree(rng, depth);
  } else if (tree.is_array()) {
    for (auto& item : tree) {
      if (rng() % 3 == 0) mutate(item, rng, depth - 1);
    }
    if (rng() % 3 == 0 && !tree.empty()) tree.erase(tree.size() - 1);
    if (rng() % 3 == 0) tree.push_back(randomTree(rng, depth));
  } else if (rng() % 2 == 0) {
    tree = randomTree(rng, depth);
  }
}

// The same operations as nlohmann's diff, in the same order, and they give `after`.
TEST(AppendDiff, AsNlohmannsDiff) {
  std::mt19937 rng(20261127);
  for (int i = 0; i < 5000; ++i) {
    json before = randomTree(rng, 4);
    json after = before;
    mutate(after, rng, 3);
    for (const std::string path : {"", "/spec/containers/0"}) {
      json patch = json::array();
      appendDiff(before, after, path, patch);
      ASSERT_EQ(patch, json::diff(before, after, path)) << before.dump() << "\n" << after.dump();
    }
    json patch = json::array();
    appendDiff(before, after, "", patch);
    ASSERT_EQ(before.patch(patch), after);
  }
}

TEST(AppendDiff, AppendsToWhatIsThere) {
  json patch = json::array({{{"op", "add"}, {"path", "/x"}, {"value", 1}}});
  appendDiff(json{{"a", 1}}, json{{"a", 2}}, "/m", patch);
  appendDiff(json{{"a", 1}}, json{{"a", 1}}, "/n", patch);  // equal: nothing
  EXPECT_EQ(patch, json::parse(R"([{"op":"add","path":"/x","value":1},{"op":"replace","path":"/m/a","value":2}])"));
}

// A key as a JSON Pointer token (RFC 6901): "~" as "~0", "/" as "~1", what nlohmann's
// json_pointer reads back as the key.
TEST(AppendPointerToken, EscapesAsRfc6901) {
  std::vector<std::string> keys = {"plain", "", "~", "/", "a~b/c", "podshaper.io/shm-size", "~1", "//~~", "x/"};
  // Either character at every place of keys up to 24 bytes long (the eight-byte steps and
  // the overlapping last word), and bytes next to them in value ('.', '0', '}', 0x7e|0x80).
  for (std::size_t length = 1; length <= 24; ++length) {
    keys.push_back(std::string(length, '.'));
    keys.push_back(std::string(length, '\xfe'));
    for (std::size_t at = 0; at < length; ++at) {
      for (char c : {'~', '/'}) {
        std::string key(length, at % 2 == 0 ? '0' : '}');
        key[at] = c;
        keys.push_back(key);
      }
    }
  }
  for (const std::string& key : keys) {
    std::string pointer;
    appendPointerToken(pointer, key);
    std::string expected = "/";
    for (char c : key) expected += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
    EXPECT_EQ(pointer, expected) << key;
    EXPECT_EQ(nlohmann::json::json_pointer(pointer).back(), key);
    EXPECT_EQ(unescapePointerToken(std::string_view(pointer).substr(1)), key) << "read back";
  }
  EXPECT_EQ(unescapePointerToken("~01"), "~1");  // "~0" then "1": not "/"
  EXPECT_EQ(unescapePointerToken("~2~"), "~2~");  // no escape: kept as written
}

}  // namespace
}  // namespace podshaper
