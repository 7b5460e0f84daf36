#include "base/json_edit.h"

#include <charconv>

#include "base/json_diff.h"
#include "base/json_util.h"
#include "base/json_write.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

// Room for the pointers a pod's edits write ("/spec/containers/0/securityContext/capabilities/add"
// is 51 bytes), made once rather than grown step by step.
constexpr std::size_t kPointerBytes = 112;
// Room for a pod's patch (a realistic pod's is 3.3 KB), made once rather than doubled six times.
constexpr std::size_t kPatchBytes = 4096;

void appendStep(std::string& pointer, const JsonStep& step) {
  if (step.isIndex) {
    char digits[24] = {'/'};
    const char* end = std::to_chars(digits + 1, digits + sizeof digits, step.index).ptr;
    pointer.append(digits, static_cast<std::size_t>(end - digits));
  } else {
    appendPointerToken(pointer, step.key);
  }
}

// The member a key step names, or nullptr.
json* find(json& object, std::string_view key) {
  auto& members = *object.get_ptr<json::object_t*>();
  auto it = findMember(members, key);
  return it == members.end() ? nullptr : &it->second;
}

}  // namespace

JsonText::JsonText(json v) : value(std::move(v)) { appendJson(text, value); }

JsonEdit::JsonEdit(json& document) : doc_(document) { pointer_.reserve(kPointerBytes); }

void JsonEdit::writeOp(const char* op, const std::string& path) {
  if (ops_.empty()) ops_.reserve(kPatchBytes);
  else ops_ += ',';
  ops_ += R"({"op":")";
  ops_ += op;
  ops_ += R"(","path":)";
  appendJsonString(ops_, path);
}

void JsonEdit::write(const char* op, const std::string& path, const json* value) {
  writeOp(op, path);
  if (value != nullptr) {
    ops_ += R"(,"value":)";
    appendJson(ops_, *value);
  }
  ops_ += '}';
}

void JsonEdit::writeText(const char* op, const std::string& path, std::string_view valueText) {
  writeOp(op, path);
  ops_ += R"(,"value":)";
  ops_ += valueText;
  ops_ += '}';
}

void JsonEdit::set(JsonPath path, json value) {
  std::string& pointer = pointer_;  // its room kept from the edit before
  pointer.clear();
  json* at = &doc_;  // an object or an array: the walk goes on into nothing else
  for (auto step = path.begin(); step != path.end(); ++step) {
    json* next = nullptr;
    if (step->isIndex) {
      next = &at->at(step->index);  // json::out_of_range past the end; type_error on an object
    } else {
      if (!at->is_object()) (void)at->at(std::string(step->key));  // type_error, as at() throws
      next = find(*at, step->key);
    }
    appendStep(pointer, *step);
    if (step + 1 == path.end()) {
      if (next == nullptr) {
        write("add", pointer, &value);
        (*at)[std::string(step->key)] = std::move(value);
        return;
      }
      at = next;
      break;
    }
    const JsonStep& following = *(step + 1);
    if (next != nullptr && (following.isIndex ? next->is_array() : next->is_object())) {
      at = next;
      continue;
    }
    // Missing, or a null where a key follows: the rest of the path is made here.
    if (next != nullptr && !next->is_null()) {  // what at() throws
      if (following.isIndex) (void)next->at(following.index);
      (void)next->at(std::string(following.key));
    }
    for (auto rest = path.end() - 1; rest != step; --rest) {
      if (rest->isIndex) (void)json::array().at(rest->index);  // no index into what is made
      value = jsonObject(rest->key, std::move(value));
    }
    write(next != nullptr ? "replace" : "add", pointer, &value);
    if (next != nullptr) *next = std::move(value);
    else (*at)[std::string(step->key)] = std::move(value);
    return;
  }
  if (*at == value) return;
  if (at->type() == value.type() && (value.is_object() || value.is_array())) {
    json ops = json::array();
    appendDiff(*at, value, pointer, ops);
    for (const json& op : ops) {
      if (!ops_.empty()) ops_ += ',';
      appendJson(ops_, op);
    }
  } else {
    write("replace", pointer, &value);
  }
  *at = std::move(value);
}

json* JsonEdit::arrayAt(JsonPath path) {
  json* at = &doc_;
  std::string& pointer = pointer_;  // its room kept from the edit before
  pointer.clear();
  if (path.size() == 0) return nullptr;
  for (const JsonStep& step : path) {
    json* next = step.isIndex ? &at->at(step.index) : (at->is_object() ? find(*at, step.key) : nullptr);
    if (next == nullptr) return nullptr;
    at = next;
    appendStep(pointer, step);
  }
  return at->is_array() ? at : nullptr;
}

void JsonEdit::append(JsonPath path, json value) {
  json* at = arrayAt(path);
  if (at == nullptr) {
    json items(json::value_t::array);
    items.push_back(std::move(value));
    set(path, std::move(items));
    return;
  }
  pointer_ += "/-";
  write("add", pointer_, &value);
  at->push_back(std::move(value));
}

void JsonEdit::append(JsonPath path, const JsonText& value) {
  json* at = arrayAt(path);
  if (at == nullptr) {
    append(path, value.value);
    return;
  }
  pointer_ += "/-";
  writeText("add", pointer_, value.text);
  at->push_back(value.value);
}

void JsonEdit::erase(JsonPath path) {
  json* at = &doc_;
  std::string& pointer = pointer_;  // its room kept from the edit before
  pointer.clear();
  for (auto step = path.begin(); step != path.end(); ++step) {
    const bool last = step + 1 == path.end();
    if (step->isIndex) {
      if (!at->is_array() || step->index >= at->size()) return;
      appendStep(pointer, *step);
      if (last) {
        write("remove", pointer, nullptr);
        at->erase(step->index);
        return;
      }
      at = &(*at)[step->index];
      continue;
    }
    json* next = at->is_object() ? find(*at, step->key) : nullptr;
    if (next == nullptr) return;
    appendStep(pointer, *step);
    if (last) {
      write("remove", pointer, nullptr);
      at->erase(at->find(step->key));
      return;
    }
    at = next;
  }
}

std::string JsonEdit::patch() const {
  if (ops_.empty()) return {};
  std::string out;
  out.reserve(ops_.size() + 2);
  out += '[';
  out += ops_;
  out += ']';
  return out;
}

}  // namespace podshaper
