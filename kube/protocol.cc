#include "kube/protocol.h"

#include <algorithm>
#include <charconv>

#include "base/json_parse.h"
#include "base/json_util.h"

namespace podshaper::kube {
namespace {

std::string_view pathWithoutQuery(std::string_view path) { return path.substr(0, path.find('?')); }

// For error messages, which may end up in logs, Events and JSON: at most `max`
// bytes, and only printable ASCII (a hostile or broken body is not echoed raw).
std::string truncated(std::string_view s, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    out.push_back(c >= 0x20 && c < 0x7F ? static_cast<char>(c) : '?');
  }
  if (s.size() > max) out += "...";
  return out;
}

}  // namespace

std::string resourcePath(std::string_view apiVersion, std::string_view resource, std::string_view ns,
                         std::string_view name) {
  std::string path = apiVersion.find('/') == std::string_view::npos ? "/api/" : "/apis/";
  path += apiVersion;
  if (!ns.empty()) {
    path += "/namespaces/";
    path += ns;
  }
  path += "/";
  path += resource;
  if (!name.empty()) {
    path += "/";
    path += name;
  }
  return path;
}

std::string percentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                            c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0x0F]);
    }
  }
  return out;
}

std::string withQuery(const std::string& path, const QueryParams& params) {
  std::string out = path;
  char sep = path.find('?') == std::string::npos ? '?' : '&';
  for (const auto& [key, value] : params) {
    if (value.empty()) continue;
    out.push_back(sep);
    out += percentEncode(key);
    out.push_back('=');
    out += percentEncode(value);
    sep = '&';
  }
  return out;
}

std::string listPagePath(const std::string& path, const std::string& labelSelector,
                         const std::string& fieldSelector, int limit, const std::string& continueToken) {
  return withQuery(path, {{"labelSelector", labelSelector},
                          {"fieldSelector", fieldSelector},
                          {"limit", limit > 0 ? std::to_string(limit) : ""},
                          {"continue", continueToken}});
}

int nextListLimit(std::size_t pageBytes, std::size_t pageItems, std::size_t targetBytes, int maxItems) {
  const std::size_t most = static_cast<std::size_t>(std::max(maxItems, 1));
  if (targetBytes == 0 || pageItems == 0) return static_cast<int>(most);
  const std::size_t perItem = std::max<std::size_t>(pageBytes / pageItems, 1);
  return static_cast<int>(std::clamp<std::size_t>(targetBytes / perItem, 1, most));
}

std::string watchPath(const std::string& path, const std::string& resourceVersion, const WatchOptions& options) {
  return withQuery(path, {{"watch", "1"},
                          {"allowWatchBookmarks", options.allowBookmarks ? "true" : ""},
                          {"resourceVersion", resourceVersion},
                          {"timeoutSeconds", options.timeoutSeconds > 0 ? std::to_string(options.timeoutSeconds) : ""},
                          {"labelSelector", options.labelSelector},
                          {"fieldSelector", options.fieldSelector}});
}

std::string_view patchContentType(PatchType type) {
  switch (type) {
    case PatchType::Merge: return "application/merge-patch+json";
    case PatchType::StrategicMerge: return "application/strategic-merge-patch+json";
    case PatchType::JsonPatch: return "application/json-patch+json";
    case PatchType::Apply: return "application/apply-patch+yaml";
  }
  return "application/merge-patch+json";
}

ApiError decodeApiError(std::string_view method, std::string_view path, int httpStatus, std::string_view body) {
  std::string reason;
  std::string detail;
  const auto status = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (status.is_object() && stringMember(status, "kind") == "Status") {
    reason = stringMember(status, "reason");
    detail = stringMember(status, "message");
  } else {
    while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.remove_suffix(1);
    detail = truncated(body, 200);
  }
  std::string message = std::string(method) + " " + std::string(pathWithoutQuery(path)) + ": " +
                        std::to_string(httpStatus);
  if (!reason.empty()) message += " " + reason;
  message += ": " + (detail.empty() ? std::string("(no message)") : detail);
  return makeApiError(httpStatus, std::move(reason), std::move(message));
}

ApiError transportError(std::string_view method, std::string_view path, std::string_view what) {
  return makeApiError(0, "",
                      std::string(method) + " " + std::string(pathWithoutQuery(path)) + ": " + std::string(what));
}

std::optional<std::chrono::milliseconds> retryDelay(int httpStatus, std::string_view retryAfter, bool idempotent,
                                                    std::chrono::milliseconds cap) {
  const bool retryable = httpStatus == 429 || (httpStatus >= 500 && httpStatus <= 599 && idempotent && !retryAfter.empty());
  if (!retryable) return std::nullopt;
  long long seconds = 1;
  while (!retryAfter.empty() && retryAfter.front() == ' ') retryAfter.remove_prefix(1);
  while (!retryAfter.empty() && retryAfter.back() == ' ') retryAfter.remove_suffix(1);
  long long parsed = 0;
  auto [end, ec] = std::from_chars(retryAfter.data(), retryAfter.data() + retryAfter.size(), parsed);
  if (ec == std::errc() && end == retryAfter.data() + retryAfter.size() && parsed >= 0) seconds = parsed;
  if (ec == std::errc::result_out_of_range) seconds = cap.count() / 1000 + 1;
  std::chrono::milliseconds delay = std::chrono::seconds(std::min<long long>(seconds, 24 * 3600));
  return std::min(delay, cap);
}

namespace {

bool isJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::size_t skipSpace(std::string_view text, std::size_t i) {
  while (i < text.size() && isJsonSpace(text[i])) ++i;
  return i;
}

// Where the JSON value that starts at text[i] ends: after its closing quote or bracket (the
// brackets counted, strings skipped), or at the character that ends a bare word (a number,
// true, false, null; a NUL too, which ends the text for nlohmann's parser). npos when the
// text ends first or no value begins there. Nothing else is checked: the reader reads what
// it spans.
std::size_t valueEnd(std::string_view text, std::size_t i) {
  constexpr auto npos = std::string_view::npos;
  if (i >= text.size()) return npos;
  if (text[i] == '"') {
    for (++i; i < text.size(); ++i) {
      if (text[i] == '\\') ++i;
      else if (text[i] == '"') return i + 1;
    }
    return npos;
  }
  if (text[i] == '{' || text[i] == '[') {
    std::size_t depth = 0;
    bool inString = false;
    for (; i < text.size(); ++i) {
      const char c = text[i];
      if (inString) {
        if (c == '\\') ++i;
        else if (c == '"') inString = false;
      } else if (c == '"') {
        inString = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if ((c == '}' || c == ']') && --depth == 0) {
        return i + 1;
      }
    }
    return npos;
  }
  // A bare word begins as a number or a literal does; anything else (a byte-order mark
  // that a reader alone would skip) is not a value here.
  const char first = text[i];
  if (first != '-' && (first < '0' || first > '9') && first != 't' && first != 'f' && first != 'n') return npos;
  while (i < text.size() && !isJsonSpace(text[i]) && text[i] != ',' && text[i] != ':' && text[i] != '}' &&
         text[i] != ']' && text[i] != '\0') {
    ++i;
  }
  return i;
}

}  // namespace

Result<ListPage> readListPage(JsonReader& reader, std::string_view text, int maxDepth,
                              const std::function<void(nlohmann::json&&)>& onItem) {
  constexpr auto npos = std::string_view::npos;
  // Text this reader cannot take. Where the page is not JSON, checkJson of all of it says
  // where, as the reader would (and builds no tree); else what was wrong.
  auto refused = [&](std::string_view what) -> Error {
    auto whole = checkJson(text, maxDepth);
    if (!whole) return makeError("list: response is not JSON (" + whole.error().message + ")");
    return makeError("list: " + std::string(what));
  };
  // Every member of the page but items is read at the items' depth: one depth for every
  // read of the page, so that the reader's simdjson buffers are not made again between them.
  // A member that deep, but within the page's limit, is read again at its own depth.
  const int itemDepth = maxDepth - 2;
  auto member = [&](std::string_view value) {
    auto parsed = reader.read(value, std::max(itemDepth, 0));
    if (!parsed && parsed.error().tooDeep && itemDepth + 1 >= 0) parsed = reader.read(value, itemDepth + 1);
    return parsed;
  };

  ListPage page;
  bool sawItems = false;
  bool itemsNotArray = false;
  // nlohmann's parser skips a UTF-8 byte-order mark at the start.
  std::size_t i = skipSpace(text, text.starts_with("\xEF\xBB\xBF") ? 3 : 0);
  if (i >= text.size() || text[i] != '{' || maxDepth < 1) return refused("response is not a JSON object");
  i = skipSpace(text, i + 1);
  if (i < text.size() && text[i] == '}') {
    ++i;
  } else {
    for (;;) {
      const std::size_t keyEnd = i < text.size() && text[i] == '"' ? valueEnd(text, i) : npos;
      if (keyEnd == npos) return refused("a member without a name");
      auto key = member(text.substr(i, keyEnd - i));
      if (!key) return refused("a member's name is not a string");
      i = skipSpace(text, keyEnd);
      if (i >= text.size() || text[i] != ':') return refused("a member without ':'");
      i = skipSpace(text, i + 1);
      if (*key == "items" && i < text.size() && text[i] == '[') {
        if (sawItems) return refused("response has two items members");
        sawItems = true;
        if (maxDepth < 2) return refused("items nested too deep");
        i = skipSpace(text, i + 1);
        if (i < text.size() && text[i] == ']') {
          ++i;
        } else {
          for (;;) {
            const std::size_t end = valueEnd(text, i);
            if (end == npos) return refused("an unfinished item");
            auto item = reader.read(text.substr(i, end - i), itemDepth);
            if (!item) return refused("an item is not JSON");
            onItem(std::move(*item));
            ++page.items;
            i = skipSpace(text, end);
            if (i < text.size() && text[i] == ',') {
              i = skipSpace(text, i + 1);
            } else if (i < text.size() && text[i] == ']') {
              ++i;
              break;
            } else {
              return refused("no ',' or ']' after an item");
            }
          }
        }
      } else {
        const std::size_t end = valueEnd(text, i);
        if (end == npos) return refused("an unfinished member");
        auto value = member(text.substr(i, end - i));
        if (!value) return refused("a member is not JSON");
        if (*key == "items") {
          if (sawItems) return refused("response has two items members");
          sawItems = true;
          itemsNotArray = !value->is_null();
        } else if (*key == "kind") {
          page.kind = std::move(*value);
        } else if (*key == "apiVersion") {
          page.apiVersion = std::move(*value);
        } else if (*key == "metadata") {
          page.resourceVersion.reset();
          if (auto rv = value->find("resourceVersion"); value->is_object() && rv != value->end()) {
            page.resourceVersion = std::move(*rv);
          }
          page.continueToken = stringMember(*value, "continue");
        }
        i = end;
      }
      i = skipSpace(text, i);
      if (i < text.size() && text[i] == ',') {
        i = skipSpace(text, i + 1);
      } else if (i < text.size() && text[i] == '}') {
        ++i;
        break;
      } else {
        return refused("no ',' or '}' after a member");
      }
    }
  }
  // nlohmann's parser ends the text at a NUL; so does this.
  if (const std::size_t rest = skipSpace(text, i); rest != text.size() && text[rest] != '\0') {
    return refused("text after the list");
  }
  if (!sawItems || itemsNotArray) {
    const std::string kind = page.kind && page.kind->is_string() ? page.kind->get<std::string>() : "unknown";
    return makeError("list: response has no items array (kind " + kind + ")");
  }
  return page;
}

Result<WatchEvent> decodeWatchLine(JsonReader& reader, std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  if (line.empty()) return makeError("watch: empty line");
  auto parsed = reader.read(line, kMaxObjectDepth);
  if (!parsed) {
    return makeError(parsed.error().tooDeep ? "watch: line " + parsed.error().message + ": " + truncated(line, 120)
                                            : "watch: line is not JSON: " + truncated(line, 120));
  }
  nlohmann::json doc = std::move(*parsed);
  if (!doc.is_object()) return makeError("watch: line is not a JSON object: " + truncated(line, 120));
  auto type = doc.find("type");
  if (type == doc.end() || !type->is_string()) return makeError("watch: event has no type: " + truncated(line, 120));
  WatchEvent event;
  event.type = type->get<std::string>();
  if (event.type != "ADDED" && event.type != "MODIFIED" && event.type != "DELETED" && event.type != "BOOKMARK" &&
      event.type != "ERROR") {
    return makeError("watch: unknown event type \"" + truncated(event.type, 40) + "\"");
  }
  auto object = doc.find("object");
  if (object == doc.end() || !object->is_object()) {
    return makeError("watch: " + event.type + " event has no object");
  }
  event.object = std::move(*object);
  return event;
}

bool isGoneEvent(const WatchEvent& event) {
  if (event.type != "ERROR") return false;
  auto code = event.object.find("code");
  if (code != event.object.end() && code->is_number_integer() && code->get<long long>() == 410) return true;
  // Some servers send the reason without the code.
  const std::string reason = stringMember(event.object, "reason");
  return reason == "Expired" || reason == "Gone";
}

std::string resourceVersionOf(const nlohmann::json& object) {
  if (!object.is_object()) return "";
  auto meta = object.find("metadata");
  if (meta == object.end()) return "";
  return stringMember(*meta, "resourceVersion");
}

std::string describeStatus(const nlohmann::json& status) {
  std::string reason = stringMember(status, "reason");
  std::string message = stringMember(status, "message");
  if (reason.empty()) return message.empty() ? truncated(status.dump(), 200) : message;
  return message.empty() ? reason : reason + ": " + message;
}

bool LineSplitter::append(std::string_view bytes) {
  // Drop what next() already returned before the buffer grows.
  if (start_ > 0 && (start_ == buffer_.size() || start_ > (1u << 16))) {
    buffer_.erase(0, start_);
    scan_ -= start_;
    open_ -= start_;
    start_ = 0;
  }
  if (const std::size_t nl = bytes.rfind('\n'); nl != std::string_view::npos) open_ = buffer_.size() + nl + 1;
  buffer_.append(bytes);
  return buffer_.size() - open_ <= maxLine_;
}

std::optional<std::string> LineSplitter::next() {
  const std::size_t nl = buffer_.find('\n', scan_);
  if (nl == std::string::npos) {
    scan_ = buffer_.size();
    return std::nullopt;
  }
  std::size_t end = nl;
  if (end > start_ && buffer_[end - 1] == '\r') --end;
  std::string line = buffer_.substr(start_, end - start_);
  start_ = nl + 1;
  scan_ = start_;
  return line;
}

}  // namespace podshaper::kube
