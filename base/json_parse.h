#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"

namespace simdjson::dom {
class parser;
}  // namespace simdjson::dom

namespace podshaper {

// JSON text into an nlohmann::json, as nlohmann::json::parse reads it (the same values,
// the last of duplicate keys kept), about three times faster: simdjson (Debian's
// libsimdjson) finds the structure and the tree is built from what it found. Text it
// refuses (a number past 64 bits, say) is read by nlohmann's parser, so nothing it
// accepted before is refused. Objects and arrays nested deeper than maxDepth (in what
// nlohmann reads: up to a NUL outside a string) are refused before any tree is built: copying, comparing and dumping a tree recurse once
// per level. A "-0" reads as an unsigned 0 (nlohmann: a signed 0; they compare equal).
// simdjson reads texts up to 64 KiB (an object, a watch event, an AdmissionReview) with
// buffers its reader keeps (its tape and indexes: about 14 bytes per byte of the largest
// such text it read, under 1 MiB); a larger text (a list page) is read by nlohmann's
// parser, which needs no buffers beside the tree it builds.
// The largest text simdjson reads (above); a larger one is read by nlohmann's parser.
inline constexpr std::size_t kSimdjsonReadsUpTo = 64 * 1024;

struct JsonParseError : Error {
  bool tooDeep = false;  // message "nested deeper than N"; else "not valid JSON at byte B"
};

// Reads JSON texts one after another, keeping what reading one needs for the next:
// simdjson's buffers (made at the first text it reads with simdjson, grown to the largest)
// and the refill's lists of members met. A reader made for one text costs those buffers
// once; one kept across texts (a webhook thread's, a watch's) costs them once for all.
// One text at a time: a thread owns its reader.
class JsonReader {
 public:
  JsonReader();
  ~JsonReader();
  JsonReader(JsonReader&&) noexcept;
  JsonReader& operator=(JsonReader&&) noexcept;

  Result<nlohmann::json, JsonParseError> read(std::string_view text, int maxDepth);

  // The same, read into `tree` (afterwards equal to what read returns), reusing what it
  // holds: a member of the same key, an item at the same place and a string's buffer are
  // filled again where they are, not freed and made anew. Reading texts of one shape into
  // one tree (the AdmissionReviews of one webhook thread) costs a fifth of read and
  // freeTree together. On an error `tree` is null.
  Result<void, JsonParseError> into(nlohmann::json& tree, std::string_view text, int maxDepth);

 private:
  std::unique_ptr<simdjson::dom::parser> parser_;
  // The members met so far in each object being refilled, innermost last.
  std::vector<const nlohmann::json*> hits_;
  // The members passed over by keys met in order, likewise: the text lacks them.
  std::vector<nlohmann::json::object_t::iterator> passed_;
};

// Whether a JsonReader would read the text, and if not, the error it would give, without
// building any tree (nlohmann's SAX parser): for a large text already refused for another
// reason, whose own fault is wanted (a list page, kube::readListPage).
Result<void, JsonParseError> checkJson(std::string_view text, int maxDepth);

// Frees a tree no deeper than a read's maxDepth, leaves first: nlohmann's destructor
// moves every value of a tree through a stack of its own (so that no tree, however deep,
// overflows the call stack), which was a sixth of an admission. `tree` is left null.
void freeTree(nlohmann::json& tree);

}  // namespace podshaper
