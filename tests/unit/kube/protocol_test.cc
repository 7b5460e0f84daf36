#include "kube/protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace podshaper::kube {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(ResourcePath, CoreAndGroups) {
  EXPECT_EQ(resourcePath("v1", "nodes"), "/api/v1/nodes");
  EXPECT_EQ(resourcePath("v1", "nodes", "", "gpu-1"), "/api/v1/nodes/gpu-1");
  EXPECT_EQ(resourcePath("v1", "pods", "ml", "train-0"), "/api/v1/namespaces/ml/pods/train-0");
  EXPECT_EQ(resourcePath("podshaper.io/v1alpha1", "gputopologyreports", "", "n1"),
            "/apis/podshaper.io/v1alpha1/gputopologyreports/n1");
  EXPECT_EQ(resourcePath("coordination.k8s.io/v1", "leases", "podshaper-system"),
            "/apis/coordination.k8s.io/v1/namespaces/podshaper-system/leases");
}

TEST(PercentEncode, KeepsUnreservedOnly) {
  EXPECT_EQ(percentEncode("abcXYZ019-._~"), "abcXYZ019-._~");
  EXPECT_EQ(percentEncode("app in (a,b)"), "app%20in%20%28a%2Cb%29");
  EXPECT_EQ(percentEncode("podshaper.io/inject=true"), "podshaper.io%2Finject%3Dtrue");
  EXPECT_EQ(percentEncode("!x&y=+"), "%21x%26y%3D%2B");
  EXPECT_EQ(percentEncode("\xc3\xa9"), "%C3%A9");
}

TEST(WithQuery, Table) {
  struct Case {
    std::string path;
    QueryParams params;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"/api/v1/nodes", {}, "/api/v1/nodes"},
      {"/api/v1/nodes", {{"limit", "500"}}, "/api/v1/nodes?limit=500"},
      {"/api/v1/nodes", {{"labelSelector", ""}, {"limit", "5"}}, "/api/v1/nodes?limit=5"},
      {"/api/v1/nodes?x=1", {{"limit", "5"}}, "/api/v1/nodes?x=1&limit=5"},
      {"/api/v1/pods", {{"fieldSelector", "spec.nodeName=n1"}, {"limit", "1"}},
       "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&limit=1"},
  };
  for (const auto& c : cases) EXPECT_EQ(withQuery(c.path, c.params), c.want);
}

TEST(ListPagePath, FirstAndContinuedPages) {
  EXPECT_EQ(listPagePath("/api/v1/nodes", "", "", 500, ""), "/api/v1/nodes?limit=500");
  EXPECT_EQ(listPagePath("/api/v1/nodes", "podshaper.io/gpu-count=8", "", 500, "eyJ2Ijo="),
            "/api/v1/nodes?labelSelector=podshaper.io%2Fgpu-count%3D8&limit=500&continue=eyJ2Ijo%3D");
  EXPECT_EQ(listPagePath("/api/v1/nodes", "", "metadata.name=a", 0, ""),
            "/api/v1/nodes?fieldSelector=metadata.name%3Da");
}

// Pages of about 1 MiB: GPU Nodes of 12 KB each 85 a page, small claims the most a page
// holds; never fewer than one item, nor more than the most.
TEST(NextListLimit, AboutTheTargetBytesAtTheLastPagesSizePerItem) {
  constexpr std::size_t kMiB = 1 << 20;
  EXPECT_EQ(nextListLimit(50 * 12288, 50, kMiB, 500), 85);
  EXPECT_EQ(nextListLimit(50 * 1500, 50, kMiB, 500), 500);
  EXPECT_EQ(nextListLimit(3 * kMiB, 1, kMiB, 500), 1);      // an item larger than a page
  EXPECT_EQ(nextListLimit(0, 50, kMiB, 500), 500);          // items of no text: the most
  EXPECT_EQ(nextListLimit(4096, 0, kMiB, 500), 500);        // an empty page says nothing
  EXPECT_EQ(nextListLimit(50 * 12288, 50, 0, 500), 500);    // no target: the most
  EXPECT_EQ(nextListLimit(50 * 12288, 50, kMiB, 0), 1);     // a nonsense most: one
}

TEST(WatchPath, AllParameters) {
  WatchOptions o;
  o.timeoutSeconds = 300;
  EXPECT_EQ(watchPath("/api/v1/nodes", "12345", o),
            "/api/v1/nodes?watch=1&allowWatchBookmarks=true&resourceVersion=12345&timeoutSeconds=300");
  o.allowBookmarks = false;
  o.timeoutSeconds = 0;
  o.labelSelector = "a=b";
  EXPECT_EQ(watchPath("/api/v1/namespaces", "", o), "/api/v1/namespaces?watch=1&labelSelector=a%3Db");
}

TEST(PatchContentType, EachType) {
  EXPECT_EQ(patchContentType(PatchType::Merge), "application/merge-patch+json");
  EXPECT_EQ(patchContentType(PatchType::StrategicMerge), "application/strategic-merge-patch+json");
  EXPECT_EQ(patchContentType(PatchType::JsonPatch), "application/json-patch+json");
  EXPECT_EQ(patchContentType(PatchType::Apply), "application/apply-patch+yaml");
}

TEST(DecodeApiError, Table) {
  struct Case {
    std::string description;
    std::string method, path;
    int status;
    std::string body;
    std::string wantMessage, wantReason;
  };
  const std::vector<Case> cases = {
      {"Status body", "GET", "/api/v1/nodes/gpu-1", 404,
       R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"nodes \"gpu-1\" not found","reason":"NotFound","details":{"name":"gpu-1","kind":"nodes"},"code":404})",
       R"(GET /api/v1/nodes/gpu-1: 404 NotFound: nodes "gpu-1" not found)", "NotFound"},
      {"conflict, query left out", "PUT", "/apis/podshaper.io/v1alpha1/gputopologyreports/n1?fieldManager=podshaper",
       409,
       R"({"kind":"Status","status":"Failure","message":"the object has been modified","reason":"Conflict","code":409})",
       "PUT /apis/podshaper.io/v1alpha1/gputopologyreports/n1: 409 Conflict: the object has been modified",
       "Conflict"},
      {"410 expired", "GET", "/api/v1/nodes?watch=1&resourceVersion=1", 410,
       R"js({"kind":"Status","status":"Failure","message":"too old resource version: 1 (500)","reason":"Expired","code":410})js",
       "GET /api/v1/nodes: 410 Expired: too old resource version: 1 (500)", "Expired"},
      {"not JSON", "GET", "/healthz", 502, "<html>bad gateway</html>\n", "GET /healthz: 502: <html>bad gateway</html>",
       ""},
      {"empty body", "DELETE", "/api/v1/namespaces/x", 500, "", "DELETE /api/v1/namespaces/x: 500: (no message)", ""},
      {"JSON but not a Status", "GET", "/x", 403, R"({"error":"nope"})", R"(GET /x: 403: {"error":"nope"})", ""},
  };
  for (const auto& c : cases) {
    ApiError e = decodeApiError(c.method, c.path, c.status, c.body);
    EXPECT_EQ(e.code, c.status) << c.description;
    EXPECT_EQ(e.reason, c.wantReason) << c.description;
    EXPECT_EQ(e.message, c.wantMessage) << c.description;
  }
}

TEST(DecodeApiError, LongOrBinaryBodiesAreCutAndMadePrintable) {
  ApiError e = decodeApiError("GET", "/x", 500, std::string(5000, 'a'));
  EXPECT_LT(e.message.size(), 300u);
  e = decodeApiError("GET", "/x", 502, "bad\x01\xff gateway\r\n");
  EXPECT_EQ(e.message, "GET /x: 502: bad?? gateway");
}

TEST(ApiError, Predicates) {
  EXPECT_TRUE(decodeApiError("GET", "/x", 404, "").isNotFound());
  EXPECT_TRUE(decodeApiError("GET", "/x", 409, "").isConflict());
  EXPECT_TRUE(decodeApiError("GET", "/x", 410, "").isGone());
  EXPECT_TRUE(decodeApiError("GET", "/x", 429, "").isTooManyRequests());
  ApiError t = transportError("GET", "/x?y=1", "Failed to connect");
  EXPECT_TRUE(t.isTransport());
  EXPECT_EQ(t.message, "GET /x: Failed to connect");
}

TEST(ApiResult, ConvertsToResult) {
  ApiResult<int> bad = makeApiError(404, "NotFound", "gone");
  Result<int> r = bad;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "gone");
  ApiResult<int> good = 7;
  Result<int> g = std::move(good);
  EXPECT_EQ(*g, 7);
}

TEST(RetryDelay, Table) {
  struct Case {
    int status;
    std::string retryAfter;
    bool idempotent;
    std::optional<milliseconds> want;
  };
  const milliseconds cap = seconds(30);
  const std::vector<Case> cases = {
      {429, "3", false, seconds(3)},        // any verb: APF rejected it before doing anything
      {429, "", true, seconds(1)},          // missing: 1 s
      {429, " 2 ", true, seconds(2)},       // spaces
      {429, "soon", true, seconds(1)},      // not a number (an HTTP date): 1 s
      {429, "0", true, seconds(0)},         // "now"
      {429, "3600", true, seconds(30)},     // capped
      {429, "99999999999999999999", true, seconds(30)},
      {503, "5", true, seconds(5)},         // 5xx with Retry-After, GET
      {503, "5", false, std::nullopt},      // ... but not a write
      {500, "", true, std::nullopt},        // 5xx without Retry-After
      {404, "1", true, std::nullopt},
      {409, "", false, std::nullopt},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(retryDelay(c.status, c.retryAfter, c.idempotent, cap), c.want)
        << c.status << " Retry-After \"" << c.retryAfter << "\"";
  }
}

// A page read item by item: what onItem got, and what the page said beside its items.
struct ReadPage {
  std::vector<json> items;
  Result<ListPage> page;
};
ReadPage readPage(std::string_view text, int maxDepth = kMaxObjectDepth) {
  std::vector<json> items;
  JsonReader reader;
  auto page = readListPage(reader, text, maxDepth, [&](json&& item) { items.push_back(std::move(item)); });
  return {std::move(items), std::move(page)};
}

TEST(ReadListPage, ItemByItemWithWhatThePageSays) {
  auto r = readPage(R"({
    "kind":"NodeList","apiVersion":"v1",
    "metadata":{"resourceVersion":"100","continue":"tok1","remainingItemCount":1},
    "items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]})");
  ASSERT_TRUE(r.page.ok()) << r.page.error().message;
  EXPECT_EQ(r.items, (std::vector<json>{json::parse(R"({"metadata":{"name":"a"}})"),
                                        json::parse(R"({"metadata":{"name":"b"}})")}));
  EXPECT_EQ(r.page->items, 2u);
  EXPECT_EQ(r.page->kind, json("NodeList"));
  EXPECT_EQ(r.page->apiVersion, json("v1"));
  EXPECT_EQ(r.page->resourceVersion, json("100"));
  EXPECT_EQ(r.page->continueToken, "tok1");

  auto last = readPage(R"({"metadata":{"resourceVersion":"101"},"items":[]})");
  ASSERT_TRUE(last.page.ok());
  EXPECT_TRUE(last.items.empty());
  EXPECT_EQ(last.page->continueToken, "");
  EXPECT_FALSE(last.page->kind.has_value());

  auto none = readPage(R"({"kind":"PodList","metadata":{"resourceVersion":"7"},"items":null})");
  ASSERT_TRUE(none.page.ok());
  EXPECT_EQ(none.page->items, 0u);
}

// Whatever nlohmann::json::parse reads as a list, read the same: white space anywhere,
// brackets and quotes inside strings, escaped names, any JSON value as an item, and the
// last of duplicate members.
TEST(ReadListPage, ReadsWhatNlohmannReads) {
  const std::vector<std::string> pages = {
      R"({"items":[{"s":"]}\"{[","t":"\\"},[1,[2]],"x",-1.5e3,true,false,null,{}]})",
      " \n{ \"items\" :\r\n[ {\"a\" : [ ] } ,\t{ } ] , \"kind\" : \"L\" } \n",
      R"({"\u0069tems":[1,2],"metadata":{"continue":"a"},"metadata":{"resourceVersion":"9"}})",
      R"({"kind":"A","kind":"B","items":[{"k":"\u00e9\ud83d\ude00"}],"other":{"x":[{}]}})",
      R"({"items":[]})",
      "\xEF\xBB\xBF {\"apiVersion\":\"v1\",\"items\":[{}]}",  // a byte-order mark, at the start only
  };
  for (const auto& text : pages) {
    const json whole = json::parse(text);
    auto r = readPage(text);
    ASSERT_TRUE(r.page.ok()) << text << ": " << r.page.error().message;
    EXPECT_EQ(json(r.items), whole["items"]) << text;
    EXPECT_EQ(r.page->kind, whole.contains("kind") ? std::optional<json>(whole["kind"]) : std::nullopt) << text;
    EXPECT_EQ(r.page->apiVersion,
              whole.contains("apiVersion") ? std::optional<json>(whole["apiVersion"]) : std::nullopt)
        << text;
    const json& meta = whole.contains("metadata") ? whole["metadata"] : json::object();
    EXPECT_EQ(r.page->resourceVersion,
              meta.contains("resourceVersion") ? std::optional<json>(meta["resourceVersion"]) : std::nullopt);
    EXPECT_EQ(r.page->continueToken, meta.value("continue", ""));
  }
}

TEST(ReadListPage, RefusesWhatIsNotAListSayingWhy) {
  struct Case {
    std::string text;
    std::string message;
    std::size_t itemsGiven = 0;  // before the error was found
  };
  const std::vector<Case> cases = {
      {"[1,2]", "list: response is not a JSON object"},
      {"", "list: response is not JSON (not valid JSON at byte 1)"},
      {R"({"kind":"Node","metadata":{}})", "list: response has no items array (kind Node)"},
      {R"({"items":{"a":1}})", "list: response has no items array (kind unknown)"},
      {R"({"items":[1],"items":[2]})", "list: response has two items members", 1},
      {R"({"items":[{"a":1},{"b":)", "list: response is not JSON (not valid JSON at byte 24)", 1},
      {R"({"items":[{"a":1}{"b":2}]})", "list: response is not JSON (not valid JSON at byte 18)", 1},
      {R"({"items":[{"a":1]]})", "list: response is not JSON (not valid JSON at byte 17)"},
      {R"({"items":[tru]})", "list: response is not JSON (not valid JSON at byte 14)"},
      {R"({"items":[]} x)", "list: response is not JSON (not valid JSON at byte 14)"},
      {R"({"items":[],})", "list: response is not JSON (not valid JSON at byte 13)"},
      {"{\"items\":[\"\x01\"]}", "list: response is not JSON (not valid JSON at byte 12)"},
      // A byte-order mark anywhere but the start is not JSON (parsed alone, an item's would be skipped).
      {"{\"items\":[\xEF\xBB\xBF" "1]}", "list: response is not JSON (not valid JSON at byte 11)"},
      {"{\"kind\":\xEF\xBB\xBF\"X\",\"items\":[]}", "list: response is not JSON (not valid JSON at byte 9)"},
      {R"({"items":[1],"items":2})", "list: response has two items members", 1},
  };
  for (const auto& c : cases) {
    auto r = readPage(c.text);
    ASSERT_FALSE(r.page.ok()) << c.text;
    EXPECT_EQ(r.page.error().message, c.message) << c.text;
    EXPECT_EQ(r.items.size(), c.itemsGiven) << c.text;
  }
}

// The page's levels count: at maxDepth 4 an item may nest 2 deep, and the page's other
// members 3 deep, as nestedDeeperThan counts the whole page.
TEST(ReadListPage, RefusesItemsNestedDeeperThanTheLimit) {
  EXPECT_TRUE(readPage(R"({"items":[{"a":[]}],"metadata":{"a":{"b":{}}}})", 4).page.ok());
  auto deepItem = readPage(R"({"items":[{"a":[[]]}]})", 4);
  ASSERT_FALSE(deepItem.page.ok());
  EXPECT_EQ(deepItem.page.error().message, "list: response is not JSON (nested deeper than 4)");
  auto deepMember = readPage(R"({"items":[],"metadata":{"a":{"b":{"c":{}}}}})", 4);
  ASSERT_FALSE(deepMember.page.ok());
  EXPECT_EQ(deepMember.page.error().message, "list: response is not JSON (nested deeper than 4)");
  EXPECT_FALSE(readPage(R"({"items":[]})", 1).page.ok());
  EXPECT_TRUE(readPage(R"({"items":[]})", 2).page.ok());
}

struct WatchLineCase {
  std::string description = "";
  std::string line = "";
  bool ok = false;
  std::string type = "";       // when ok
  std::string rv = "";         // when ok
  bool gone = false;           // when ok
  std::string errorPart = "";  // when not ok
};

class DecodeWatchLineTest : public ::testing::TestWithParam<WatchLineCase> {};

TEST_P(DecodeWatchLineTest, Decodes) {
  const auto& c = GetParam();
  JsonReader reader;
  auto event = decodeWatchLine(reader, c.line);
  ASSERT_EQ(event.ok(), c.ok) << c.description << ": " << (event.ok() ? "" : event.error().message);
  if (!c.ok) {
    EXPECT_NE(event.error().message.find(c.errorPart), std::string::npos)
        << c.description << ": " << event.error().message;
    return;
  }
  EXPECT_EQ(event->type, c.type) << c.description;
  EXPECT_EQ(resourceVersionOf(event->object), c.rv) << c.description;
  EXPECT_EQ(isGoneEvent(*event), c.gone) << c.description;
}

INSTANTIATE_TEST_SUITE_P(
    Table, DecodeWatchLineTest,
    ::testing::Values(
        WatchLineCase{"added", R"({"type":"ADDED","object":{"kind":"Node","metadata":{"name":"a","resourceVersion":"5"}}})",
                      true, "ADDED", "5"},
        WatchLineCase{"modified with CRLF",
                      "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"6\"}}}\r",
                      true, "MODIFIED", "6"},
        WatchLineCase{"deleted", R"({"type":"DELETED","object":{"metadata":{"name":"a","resourceVersion":"7"}}})", true,
                      "DELETED", "7"},
        WatchLineCase{"bookmark",
                      R"({"type":"BOOKMARK","object":{"kind":"Node","apiVersion":"v1","metadata":{"resourceVersion":"12746","annotations":{"k8s.io/initial-events-end":"true"}}}})",
                      true, "BOOKMARK", "12746"},
        WatchLineCase{"error 410 by code",
                      R"js({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (12745)","reason":"Expired","code":410}})js",
                      true, "ERROR", "", true},
        WatchLineCase{"error 410 by reason only",
                      R"({"type":"ERROR","object":{"kind":"Status","reason":"Gone","message":"x"}})", true, "ERROR",
                      "", true},
        WatchLineCase{"error 500", R"({"type":"ERROR","object":{"kind":"Status","reason":"InternalError","code":500}})",
                      true, "ERROR", "", false},
        WatchLineCase{"empty line", "", false, "", "", false, "empty line"},
        WatchLineCase{"not JSON", "{\"type\":\"ADDED\",", false, "", "", false, "not JSON"},
        WatchLineCase{"garbage", "\x01\x02\xff", false, "", "", false, "not JSON"},
        WatchLineCase{"array", "[1,2,3]", false, "", "", false, "not a JSON object"},
        WatchLineCase{"no type", R"({"object":{}})", false, "", "", false, "no type"},
        WatchLineCase{"type not a string", R"({"type":1,"object":{}})", false, "", "", false, "no type"},
        WatchLineCase{"unknown type", R"({"type":"RENAMED","object":{}})", false, "", "", false,
                      "unknown event type \"RENAMED\""},
        WatchLineCase{"no object", R"({"type":"ADDED"})", false, "", "", false, "ADDED event has no object"},
        WatchLineCase{"object not an object", R"({"type":"ADDED","object":"x"})", false, "", "", false,
                      "has no object"}),
    [](const ::testing::TestParamInfo<WatchLineCase>& info) {
      std::string name;
      for (char ch : info.param.description) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return name;
    });

// Found by fuzz/watch_stream_fuzzer.cc (fuzz/regressions/watch_stream/): a line
// nested 20,000 deep overflowed the stack when applyWatchEvent copied it.
TEST(DecodeWatchLine, RefusesLinesNestedDeeperThanAnyApiObject) {
  auto nested = [](int depth) {
    return R"({"type":"ADDED","object":{"metadata":{"name":"a"},"x":)" + std::string(depth, '[') +
           std::string(depth, ']') + "}}";
  };
  JsonReader reader;  // one for the stream's lines, as a watch keeps it
  auto fine = decodeWatchLine(reader, nested(900));
  ASSERT_TRUE(fine.ok()) << fine.error().message;
  auto deep = decodeWatchLine(reader, nested(100000));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.error().message.find("nested deeper than 1000"), std::string::npos) << deep.error().message;
  // Brackets in strings are not nesting.
  auto quoted = decodeWatchLine(reader, R"({"type":"ADDED","object":{"metadata":{"name":"a\"[)" + std::string(5000, '[') +
                                R"("}}})");
  ASSERT_TRUE(quoted.ok()) << quoted.error().message;
}

TEST(DescribeStatus, ReasonAndMessage) {
  EXPECT_EQ(describeStatus(json::parse(R"({"reason":"Expired","message":"too old"})")), "Expired: too old");
  EXPECT_EQ(describeStatus(json::parse(R"({"message":"only message"})")), "only message");
  EXPECT_EQ(describeStatus(json::parse(R"({"reason":"Gone"})")), "Gone");
}

TEST(LineSplitter, SplitsAcrossChunks) {
  LineSplitter s;
  EXPECT_TRUE(s.append("{\"a\":1}\n{\"b\""));
  EXPECT_EQ(s.next(), "{\"a\":1}");
  EXPECT_EQ(s.next(), std::nullopt);
  EXPECT_EQ(s.pending(), 4u);
  EXPECT_TRUE(s.append(":2}\r\n\n{\"c\":3}\n"));
  EXPECT_EQ(s.next(), "{\"b\":2}");
  EXPECT_EQ(s.next(), "");
  EXPECT_EQ(s.next(), "{\"c\":3}");
  EXPECT_EQ(s.next(), std::nullopt);
  EXPECT_EQ(s.pending(), 0u);
}

TEST(LineSplitter, ByteByByte) {
  LineSplitter s;
  const std::string stream = "one\ntwo\nthree\n";
  std::vector<std::string> got;
  for (char c : stream) {
    ASSERT_TRUE(s.append(std::string_view(&c, 1)));
    while (auto line = s.next()) got.push_back(*line);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"one", "two", "three"}));
}

TEST(LineSplitter, ManyLinesKeepWorkingAfterCompaction) {
  LineSplitter s;
  std::size_t count = 0;
  const std::string line(1000, 'x');
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(s.append(line + "\n"));
    while (auto l = s.next()) {
      ASSERT_EQ(*l, line);
      ++count;
    }
  }
  EXPECT_EQ(count, 1000u);
}

TEST(LineSplitter, RejectsAnOverlongLine) {
  LineSplitter s(8);
  EXPECT_TRUE(s.append("12345678"));
  EXPECT_FALSE(s.append("9"));
  LineSplitter t(8);
  EXPECT_TRUE(t.append("1234567\n12345678"));  // complete lines do not count against the open one
}

}  // namespace
}  // namespace podshaper::kube
