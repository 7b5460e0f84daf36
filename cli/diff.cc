#include "cli/diff.h"

#include <algorithm>
#include <vector>

namespace podshaper::cli {
namespace {

std::vector<std::string_view> linesOf(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    end = end == std::string_view::npos ? text.size() : end + 1;
    lines.push_back(text.substr(start, end - start));
    start = end;
  }
  return lines;
}

enum class Op { kSame, kRemoved, kAdded };

// The edit script by the longest common subsequence of lines, past the common head and
// tail. An object's text is a few hundred lines; past 4,000 lines between them the middle
// is shown as removed and added whole rather than compared at quadratic cost.
std::vector<std::pair<Op, std::string_view>> editScript(const std::vector<std::string_view>& a,
                                                        const std::vector<std::string_view>& b) {
  std::size_t head = 0;
  while (head < a.size() && head < b.size() && a[head] == b[head]) ++head;
  std::size_t tail = 0;
  while (tail < a.size() - head && tail < b.size() - head && a[a.size() - 1 - tail] == b[b.size() - 1 - tail]) ++tail;
  const std::size_t n = a.size() - head - tail, m = b.size() - head - tail;
  std::vector<std::pair<Op, std::string_view>> script;
  for (std::size_t i = 0; i < head; ++i) script.emplace_back(Op::kSame, a[i]);
  if (n + m > 4000) {
    for (std::size_t i = 0; i < n; ++i) script.emplace_back(Op::kRemoved, a[head + i]);
    for (std::size_t j = 0; j < m; ++j) script.emplace_back(Op::kAdded, b[head + j]);
  } else {
    // lcs[i][j]: the common subsequence of a's middle from i and b's from j.
    std::vector<std::vector<unsigned>> lcs(n + 1, std::vector<unsigned>(m + 1, 0));
    for (std::size_t i = n; i-- > 0;) {
      for (std::size_t j = m; j-- > 0;) {
        lcs[i][j] = a[head + i] == b[head + j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
      }
    }
    std::size_t i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[head + i] == b[head + j]) {
        script.emplace_back(Op::kSame, a[head + i]);
        ++i, ++j;
      } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
        script.emplace_back(Op::kRemoved, a[head + i++]);  // diff -u: the removed lines first
      } else {
        script.emplace_back(Op::kAdded, b[head + j++]);
      }
    }
  }
  for (std::size_t i = a.size() - tail; i < a.size(); ++i) script.emplace_back(Op::kSame, a[i]);
  return script;
}

std::string range(std::size_t start, std::size_t count) {
  // diff -u: a hunk of no lines names the line before it.
  std::string out = std::to_string(count == 0 ? start : start + 1);
  if (count != 1) out += "," + std::to_string(count);
  return out;
}

}  // namespace

std::string unifiedDiff(std::string_view before, std::string_view after, const std::string& beforeName,
                        const std::string& afterName) {
  if (before == after) return "";
  const auto a = linesOf(before), b = linesOf(after);
  const auto script = editScript(a, b);
  constexpr std::size_t kContext = 3;
  std::string out = "--- " + beforeName + "\n+++ " + afterName + "\n";
  std::size_t k = 0;
  while (k < script.size()) {
    if (script[k].first == Op::kSame) {
      ++k;
      continue;
    }
    // A hunk: from kContext lines before this change to kContext after the last change
    // that is no more than 2 × kContext lines from the one before it.
    std::size_t start = k >= kContext ? k - kContext : 0, end = k;
    while (end < script.size()) {
      std::size_t next = end;
      while (next < script.size() && script[next].first != Op::kSame) ++next;
      std::size_t same = next;
      while (same < script.size() && script[same].first == Op::kSame) ++same;
      if (same < script.size() && same - next <= 2 * kContext) {
        end = same;
      } else {
        end = std::min(script.size(), next + kContext);
        break;
      }
    }
    std::size_t aStart = 0, bStart = 0;
    for (std::size_t i = 0; i < start; ++i) {
      aStart += script[i].first != Op::kAdded;
      bStart += script[i].first != Op::kRemoved;
    }
    std::size_t aCount = 0, bCount = 0;
    std::string body;
    for (std::size_t i = start; i < end; ++i) {
      const auto& [op, line] = script[i];
      aCount += op != Op::kAdded;
      bCount += op != Op::kRemoved;
      body += op == Op::kSame ? ' ' : op == Op::kRemoved ? '-' : '+';
      body += line;
      if (line.empty() || line.back() != '\n') body += "\n\\ No newline at end of file\n";
    }
    out += "@@ -" + range(aStart, aCount) + " +" + range(bStart, bCount) + " @@\n" + body;
    k = end;
  }
  return out;
}

}  // namespace podshaper::cli
