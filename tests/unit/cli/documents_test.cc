#include "cli/documents.h"

#include <gtest/gtest.h>

#include <cmath>

namespace podshaper::cli {
namespace {

using json = nlohmann::json;

json one(const std::string& text) {
  auto docs = readDocuments(text);
  EXPECT_TRUE(docs.ok()) << (docs.ok() ? "" : docs.error().message);
  if (!docs.ok() || docs->size() != 1) return json();
  return docs->front();
}

TEST(ReadDocuments, ScalarsAsKubernetesReadsThem) {
  json doc = one(R"(
a: 8
b: "8"
c: true
d: 'true'
e: ~
f: 1.5
g: 18Mi
h: 0x1f
i: -3
j: 12345678901234567890123
k: ""
l: |
  two
  lines
m: [1, "2", x]
)");
  EXPECT_EQ(doc["a"], 8);
  EXPECT_EQ(doc["b"], "8");
  EXPECT_EQ(doc["c"], true);
  EXPECT_EQ(doc["d"], "true");
  EXPECT_TRUE(doc["e"].is_null());
  EXPECT_EQ(doc["f"], 1.5);
  EXPECT_EQ(doc["g"], "18Mi");
  EXPECT_EQ(doc["h"], 31);
  EXPECT_EQ(doc["i"], -3);
  EXPECT_EQ(doc["j"], 12345678901234567890123.0);  // past 64 bits: a float, its text in the layout
  EXPECT_TRUE(one("n: " + std::string(100, '9') + "\n")["n"].is_number_float()) << "as JSON reads it, however long";
  EXPECT_EQ(doc["k"], "");
  EXPECT_EQ(doc["l"], "two\nlines\n");
  EXPECT_EQ(doc["m"], json::array({1, "2", "x"}));
}

TEST(ReadDocuments, TheCoreSchemasNumbersAndWhatOnlyLooksLikeThem) {
  json doc = one("[+5, 0o17, 1e3, .5, 5., -2.5e-3, -.inf, 1e, e3, 0x, 0o8, 1.2.3, '-', +, 08]\n");
  ASSERT_TRUE(doc[6].is_number_float() && std::isinf(doc[6].get<double>()) && doc[6].get<double>() < 0) << doc[6];
  doc.erase(6);  // -.inf: a number JSON text cannot hold
  EXPECT_EQ(doc, json::parse(R"([5, 15, 1000.0, 0.5, 5.0, -0.0025, "1e", "e3", "0x", "0o8", "1.2.3", "-", "+", 8])"))
      << doc.dump();
}

TEST(ReadDocuments, SeveralDocumentsEmptyOnesSkipped) {
  auto docs = readDocuments("---\nkind: Job\n---\n---\nkind: Pod\n...\n");
  ASSERT_TRUE(docs.ok());
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[0]["kind"], "Job");
  EXPECT_EQ((*docs)[1]["kind"], "Pod");
  EXPECT_TRUE(readDocuments("").value().empty());
}

TEST(ReadDocuments, JsonAsJson) {
  json doc = one("  {\"a\": \"1\", \"b\": 1}");
  EXPECT_EQ(doc["a"], "1");
  EXPECT_EQ(doc["b"], 1);
}

TEST(ReadDocuments, BadInputIsAClearError) {
  auto yaml = readDocuments("kind: Pod\nmetadata: {name: [\n");
  ASSERT_FALSE(yaml.ok());
  EXPECT_NE(yaml.error().message.find("not valid YAML"), std::string::npos) << yaml.error().message;
  EXPECT_NE(yaml.error().message.find("line "), std::string::npos) << yaml.error().message;
  auto badJson = readDocuments("{\"kind\": ");
  ASSERT_FALSE(badJson.ok());
  EXPECT_NE(badJson.error().message.find("not valid JSON at byte"), std::string::npos);
  auto key = readDocuments("? [a]\n: b\n");
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.error().message.find("not a string"), std::string::npos);
}

TEST(ReadDocuments, ControlCharactersAreRefused) {
  // A NUL also makes yaml-cpp take the bytes for UTF-32.
  auto nul = readDocuments(std::string("a: 1\nb: \x04\0\0\0x\n", 14));
  ASSERT_FALSE(nul.ok());
  EXPECT_EQ(nul.error().message, "line 2: a control character (0x04): YAML is printable text");
  EXPECT_TRUE(readDocuments("a: \"tab\there\"\r\n").ok());
  EXPECT_TRUE(readDocuments("\xEF\xBB\xBF" "a: 1\n").ok()) << "a byte order mark first is not text";
  auto bom = readDocuments("\xEF\xBB\xBF" "a: 1\n---\n\xEF\xBB\xBF" "b: 2\n");
  ASSERT_FALSE(bom.ok());
  EXPECT_EQ(bom.error().message, "line 3: a byte order mark inside the text (one is read only as its first bytes)");
}

TEST(ReadDocuments, AStreamYamlCppWouldReadForeverIsRefused) {
  // yaml-cpp 0.7's LoadAll makes empty documents at the ", b" until memory runs out.
  for (const char* text : {"# c\n{a: x}, b\n", "kind: Pod\n---\n[1, 2], 3\n", "---\n{a: b}, {c: d}\n"}) {
    auto docs = readDocuments(text);
    ASSERT_FALSE(docs.ok()) << text;
    EXPECT_NE(docs.error().message.find("not valid YAML: text after the end of a document"), std::string::npos)
        << docs.error().message;
  }
}

TEST(ReadDocuments, AliasesThatExpandBeyondReasonAreRefused) {
  // A "billion laughs": each level ten aliases of the one before.
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    std::string prev = "*a" + std::to_string(i - 1);
    text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) text += (j ? ", " : "") + prev;
    text += "]\n";
  }
  auto docs = readDocuments(text);
  ASSERT_FALSE(docs.ok());
  EXPECT_NE(docs.error().message.find("more than a million values"), std::string::npos) << docs.error().message;
}

TEST(ReadDocuments, DeepNestingIsRefused) {
  std::string deep(300, '[');
  deep += std::string(300, ']');
  EXPECT_FALSE(readDocuments("a: " + deep + "\n").ok());
  EXPECT_FALSE(readDocuments("{\"a\": " + deep + "}").ok());
}

TEST(ToYaml, AsKubectlWritesIt) {
  json value = json::parse(R"({"kind": "Pod", "metadata": {"labels": {"a.io/b": "true"}}, "spec": {"containers": [
    {"name": "c", "args": ["x", "8"], "env": [], "ports": [{"containerPort": 80}]}], "nested": [[1, 2], []],
    "text": "one\ntwo\n", "empty": {}}})");
  EXPECT_EQ(toYaml(value), R"(kind: Pod
metadata:
  labels:
    a.io/b: "true"
spec:
  containers:
  - args:
    - x
    - "8"
    env: []
    name: c
    ports:
    - containerPort: 80
  empty: {}
  nested:
  - - 1
    - 2
  - []
  text: |
    one
    two
)");
}

TEST(ToYaml, ReadsBackAsTheSameJson) {
  json value = {{"strings", {"true", "8", "1e3", "null", "", "~", "18Mi", "a: b", "- x", "#c", "two\nlines\n", "tab\there", "ends in a carriage return\r",
                              " leading space", "trailing tab\t", "--- {c: 1}", "... x", "del\x7f" "and \"quotes\"", "yes", "0777", "1_000", "60:30", "2024-01-01"}},
                {"numbers", {8, -3, 1.5, 0}},
                {"booleans", {true, false}},
                {"nothing", nullptr},
                {"empty", json::object()},
                {"none", json::array()},
                {"podshaper.io/shm-size", "8231Mi"},
                {"8", "key that reads as a number"},
                {std::string(1500, 'k'), {{"a", 1}}},
                {std::string(1100, 'l') + ": x", {1, 2}},
                {"a: b", {{"- x", 1}, {"two\nlines\n", 2}, {"", 3}}},
                {"list", {{{"k", "two\nlines\n"}, {"m", {1, "x"}}}, json::array({json::array({1}), json::object()})}}};
  std::string yaml = toYaml(value);
  auto back = readDocuments(yaml);
  ASSERT_TRUE(back.ok()) << yaml;
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ(back->front(), value) << yaml;
}

TEST(ReadDocumentsAsWritten, EachDocumentsTextAndLinesCountedInTheFile) {
  const std::string text = "# a comment\napiVersion: v1\nkind: Pod\n---\nkind: Job\nspec: {a: 1}\n...\n--- {kind: Node}\n";
  auto docs = readDocumentsAsWritten(text);
  ASSERT_TRUE(docs.ok()) << docs.error().message;
  ASSERT_EQ(docs->size(), 3u);
  EXPECT_EQ((*docs)[0].text, "# a comment\napiVersion: v1\nkind: Pod\n");
  EXPECT_EQ((*docs)[1].text, "---\nkind: Job\nspec: {a: 1}\n...\n");
  EXPECT_EQ((*docs)[2].text, "--- {kind: Node}\n");
  EXPECT_EQ((*docs)[2].value, json::parse(R"({"kind": "Node"})"));
  auto bad = readDocumentsAsWritten("a: 1\n---\nb: 2\nc: d: e\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("line 4"), std::string::npos) << bad.error().message;
}

// A document of nothing but a tag ("!1", a null) is no document, and its text is not put
// before the next one's, where the tag would apply to that one (found by the documents fuzz
// target); comments are.
TEST(ReadDocumentsAsWritten, ANullDocumentsTextIsNotCarriedOntoTheNext) {
  const std::string text = "# c\n!1\n---\na: [1]\n... --\n# c\n!1\n---\nb: [2]\n... --\n789.5}\n";
  auto docs = readDocumentsAsWritten(text);
  ASSERT_TRUE(docs.ok()) << docs.error().message;
  ASSERT_FALSE(docs->empty());
  EXPECT_EQ(docs->back().value, "789.5}");
  EXPECT_EQ(docs->back().text.find("!1"), std::string::npos) << docs->back().text;
  auto again = readDocuments("---\n" + docs->back().text);
  ASSERT_TRUE(again.ok()) << again.error().message;
  ASSERT_EQ(again->size(), 1u) << docs->back().text;
  EXPECT_EQ(again->front(), docs->back().value) << docs->back().text;
}

TEST(Layout, KeysAndNumbersPrintedAsWritten) {
  const std::string yaml = "zeta: 1\nalpha:\n  big: 123456789012345678901234567890\n  hex: 0x1f\n  exp: 1e3\n"
                           "  plain: 2.5\n  list: [8.0, 3]\nmiddle: x\n";
  auto docs = readDocumentsAsWritten(yaml);
  ASSERT_TRUE(docs.ok());
  const Document& doc = docs->front();
  EXPECT_EQ(toYaml(doc.value, doc.layout),
            "zeta: 1\nalpha:\n  big: 123456789012345678901234567890\n  hex: 0x1f\n  exp: 1e3\n  plain: 2.5\n"
            "  list: [8.0, 3]\nmiddle: x\n");
  // A key podshaper adds comes after those read; a number it changed is written anew.
  json changed = doc.value;
  changed["alpha"]["added"] = true;
  changed["alpha"]["exp"] = 7;
  EXPECT_EQ(toYaml(changed, doc.layout),
            "zeta: 1\nalpha:\n  big: 123456789012345678901234567890\n  hex: 0x1f\n  exp: 7\n  plain: 2.5\n"
            "  list: [8.0, 3]\n  added: true\nmiddle: x\n");
  EXPECT_EQ(toYaml(doc.value), toYaml(json::parse(doc.value.dump()))) << "no layout: keys sorted";
}

TEST(Layout, FlowStyleKept) {
  auto docs = readDocumentsAsWritten("metadata: {name: x, labels: {a: \"true\"}}\nspec:\n  args: [--n, \"8\", a b]\n  list:\n  - {k: v}\n");
  ASSERT_TRUE(docs.ok());
  json changed = docs->front().value;
  changed["metadata"]["labels"]["podshaper.io/shaped"] = "true";
  changed["spec"]["args"].push_back("x, y");
  EXPECT_EQ(toYaml(changed, docs->front().layout),
            "metadata: {name: x, labels: {a: \"true\", podshaper.io/shaped: \"true\"}}\n"
            "spec:\n  args: [--n, \"8\", a b, \"x, y\"]\n  list:\n  - {k: v}\n");
  auto back = readDocuments(toYaml(changed, docs->front().layout));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->front(), changed);
}

TEST(Layout, JsonKeepsItsOrderAndNumbersToo) {
  const std::string text = R"({"kind": "Pod", "spec": {"priority": 123456789012345678901234567890, "b": 1e2, "a": [1.50]}})";
  auto docs = readDocumentsAsWritten(text);
  ASSERT_TRUE(docs.ok()) << docs.error().message;
  EXPECT_EQ(docs->front().text, text);
  EXPECT_EQ(toJson(docs->front().value, docs->front().layout),
            "{\n  \"kind\": \"Pod\",\n  \"spec\": {\n    \"priority\": 123456789012345678901234567890,\n"
            "    \"b\": 1e2,\n    \"a\": [\n      1.50\n    ]\n  }\n}\n");
  const std::string review = R"({"request": {"object": {"z": 1e2, "a/b": 2}}})";
  const Layout pod = jsonLayout(review).under("/request/object");
  EXPECT_EQ(toJson(json::parse(review)["request"]["object"], pod), "{\n  \"z\": 1e2,\n  \"a/b\": 2\n}\n");
  EXPECT_TRUE(jsonLayout("not json").keyOrder.empty());
}

}  // namespace
}  // namespace podshaper::cli
