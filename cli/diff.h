#pragma once

#include <string>
#include <string_view>

// A unified diff (diff -u) of two texts, as `review --output diff` prints it.
namespace podshaper::cli {

// The hunks turning `before` into `after` with three lines of context, under the header
// lines "--- `beforeName`" and "+++ `afterName`"; "" when the texts are equal.
std::string unifiedDiff(std::string_view before, std::string_view after, const std::string& beforeName,
                        const std::string& afterName);

}  // namespace podshaper::cli
