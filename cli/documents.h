#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"

// Kubernetes objects as users write them: YAML or JSON, several to a file.
namespace podshaper::cli {

// Whether `text` is read as JSON (its first non-blank character is `{`), not YAML.
bool isJsonText(std::string_view text);

// The documents of `text` as JSON. Text starting with `{` is one JSON document; anything
// else is a YAML stream (`---` between documents; empty ones skipped), read with YAML
// 1.2's core schema: an unquoted null, true/false, integer or float is that type, a
// quoted scalar is a string. An error names the line and what was wrong; nesting deeper
// than 128, or aliases expanding past a million values, is an error, not a hang.
Result<std::vector<nlohmann::json>> readDocuments(std::string_view text);

// `value` as a YAML document (block style), each string quoted where it would otherwise
// read back as another type ("true", "8", "1e3", "null", "") or not at all.
std::string toYaml(const nlohmann::json& value);

}  // namespace podshaper::cli
