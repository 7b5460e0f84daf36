#include "base/json_edit.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace podshaper {
namespace {

using nlohmann::json;

// The patch applied to the document as it was gives the document as it is.
void expectPatchGives(const json& before, const JsonEdit& edit) {
  const std::string patch = edit.patch();
  EXPECT_EQ(patch.empty(), !edit.changed());
  json patched = patch.empty() ? before : before.patch(json::parse(patch));
  EXPECT_EQ(patched, edit.document()) << patch;
}

TEST(JsonEdit, SetsAddsAndReplacesWithTheFewestOperations) {
  const json before = json::parse(R"({"spec": {"containers": [{"name": "a", "env": [{"name": "X", "value": "1"}]}]},
                                      "metadata": {"annotations": null}})");
  json doc = before;
  JsonEdit edit(doc);
  edit.set({"spec", "containers", 0, "env", 0, "value"}, "2");           // replace
  edit.set({"spec", "containers", 0, "resources", "limits", "memory"}, "1Gi");  // add, objects made
  edit.set({"metadata", "annotations", "a/b~c"}, "v");                   // a null made an object
  edit.set({"spec", "containers", 0, "name"}, "a");                      // as it is: nothing
  EXPECT_EQ(edit.patch(),
            R"([{"op":"replace","path":"/spec/containers/0/env/0/value","value":"2"},)"
            R"({"op":"add","path":"/spec/containers/0/resources","value":{"limits":{"memory":"1Gi"}}},)"
            R"({"op":"replace","path":"/metadata/annotations","value":{"a/b~c":"v"}}])");
  edit.set({"metadata", "annotations", "a/b~c"}, "w");
  EXPECT_NE(edit.patch().find(R"("path":"/metadata/annotations/a~1b~0c")"), std::string::npos);
  expectPatchGives(before, edit);
}

// A null inside an array where a key follows is replaced where it is: an "add" under it
// would not apply (its parent is not an object).
TEST(JsonEdit, MakesAnObjectOfANullInAnArray) {
  const json before = json::parse(R"({"terms": [null, {"e": null}]})");
  json doc = before;
  JsonEdit edit(doc);
  edit.set({"terms", 0, "k"}, 1);
  edit.append({"terms", 1, "e"}, 2);
  EXPECT_EQ(edit.patch(), R"([{"op":"replace","path":"/terms/0","value":{"k":1}},)"
                          R"({"op":"replace","path":"/terms/1/e","value":[2]}])");
  expectPatchGives(before, edit);
}

TEST(JsonEdit, AppendsToAnArrayOrMakesOne) {
  const json before = json::parse(R"({"list": [1], "notList": "x", "o": {}})");
  json doc = before;
  JsonEdit edit(doc);
  edit.append({"list"}, 2);
  edit.append({"notList"}, 3);  // replaced by an array, as ensureArray does
  edit.append({"o", "made", "here"}, 4);
  EXPECT_EQ(doc, json::parse(R"({"list": [1, 2], "notList": [3], "o": {"made": {"here": [4]}}})"));
  EXPECT_NE(edit.patch().find(R"({"op":"add","path":"/list/-","value":2})"), std::string::npos);
  expectPatchGives(before, edit);
}

// A value appended with its text made beforehand: the same document and the same patch as
// the value appended as it is, where the array is there and where it is made.
TEST(JsonEdit, AppendsAValueWithItsTextAsTheValue) {
  const json before = json::parse(R"({"list": [1], "notList": "x", "o": {}})");
  const JsonText value(json{{"key", "a/b"}, {"values", {"x\"y", 2}}});
  EXPECT_EQ(value.text, value.value.dump());
  json asValue = before, asText = before;
  JsonEdit byValue(asValue), byText(asText);
  auto both = [&](JsonPath path) {
    byValue.append(path, value.value);
    byText.append(path, value);
  };
  both({"list"});
  both({"notList"});
  both({"o", "made", "here"});
  both({"list"});
  EXPECT_EQ(asText, asValue);
  EXPECT_EQ(byText.patch(), byValue.patch());
  expectPatchGives(before, byText);
}

TEST(JsonEdit, ErasesWhatIsThereOnly) {
  const json before = json::parse(R"({"a": {"b": 1, "c": [1, 2]}})");
  json doc = before;
  JsonEdit edit(doc);
  edit.erase({"a", "missing"});
  edit.erase({"nothing", "here"});
  edit.erase({"a", "c", 5});
  EXPECT_FALSE(edit.changed());
  EXPECT_EQ(edit.patch(), "");
  edit.erase({"a", "b"});
  edit.erase({"a", "c", 0});
  EXPECT_EQ(doc, json::parse(R"({"a": {"c": [2]}})"));
  expectPatchGives(before, edit);
}

TEST(JsonEdit, SettingAContainerWritesItsDiff) {
  const json before = json::parse(R"({"terms": [{"e": [1]}, {"e": [2]}]})");
  json doc = before;
  JsonEdit edit(doc);
  edit.set({"terms"}, json::parse(R"([{"e": [1, 9]}, {"e": [2, 9]}])"));
  EXPECT_EQ(edit.patch(), R"([{"op":"add","path":"/terms/0/e/-","value":9},{"op":"add","path":"/terms/1/e/-","value":9}])");
  expectPatchGives(before, edit);
}

// What the document cannot hold throws nlohmann's exceptions, as operator[] and at() do
// (shapePod turns them into a denial), and writes nothing for that change.
TEST(JsonEdit, ThrowsWhereTheDocumentCannotHoldTheChange) {
  json doc = json::parse(R"({"s": "text", "list": [1], "n": null})");
  JsonEdit edit(doc);
  EXPECT_THROW(edit.set({"s", "key"}, 1), json::type_error);
  EXPECT_THROW(edit.set({"list", "key"}, 1), json::type_error);
  EXPECT_THROW(edit.set({"list", 3, "key"}, 1), json::out_of_range);
  EXPECT_THROW(edit.append({"n", 0, "x"}, 1), json::exception);
  EXPECT_FALSE(edit.changed());
  EXPECT_EQ(doc, json::parse(R"({"s": "text", "list": [1], "n": null})"));
}

// Random documents and random changes: the patch always gives the document.
TEST(JsonEdit, RandomChangesAlwaysGiveTheirPatch) {
  std::mt19937 rng(7);
  const char* keys[] = {"a", "b", "x/y", "~t"};
  for (int round = 0; round < 300; ++round) {
    json before = json::object();
    for (int i = 0; i < 3; ++i) before[keys[rng() % 4]] = json::parse(R"({"a": [1, {"b": 2}], "b": null})");
    json doc = before;
    JsonEdit edit(doc);
    for (int i = 0; i < 6; ++i) {
      const char* k1 = keys[rng() % 4];
      const char* k2 = keys[rng() % 4];
      try {
        switch (rng() % 4) {
          case 0: edit.set({k1, k2}, static_cast<int>(rng() % 3)); break;
          case 1: edit.append({k1, k2}, "v"); break;
          case 2: edit.erase({k1, k2}); break;
          default: edit.set({k1}, json::parse(R"({"a": [1, {"b": 3}, 4]})")); break;
        }
      } catch (const json::exception&) {
      }
    }
    expectPatchGives(before, edit);
  }
}

}  // namespace
}  // namespace podshaper
