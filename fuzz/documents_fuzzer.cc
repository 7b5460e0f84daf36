// The manifests `review -f` reads (cli/documents.h): YAML streams or JSON, printed back as
// YAML or JSON with each document's layout (keys' order, numbers' text).
//   readDocumentsAsWritten: never throws; an error says which line for YAML.
//   toYaml(value, layout) reads back as one document of the same value (NaN aside);
//   toJson(value, layout) is JSON of the same value (where no number is infinite or NaN);
//   each document's text, when kept, reads back as that document (after a "---", as
//   review prints it in a stream).

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "cli/documents.h"
#include "fuzz/fuzz_check.h"

namespace {

using nlohmann::json;
using podshaper::fuzz::show;

bool finite(const json& v) {
  if (v.is_number_float()) return std::isfinite(v.get<double>());
  if (v.is_structured()) {
    for (const auto& child : v) {
      if (!finite(child)) return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text = podshaper::fuzz::asText(data, size);
  auto docs = podshaper::cli::readDocumentsAsWritten(text);
  if (!docs) {
    FUZZ_CHECK(!docs.error().message.empty(), std::string(text));
    return 0;
  }
  for (const auto& doc : *docs) {
    if (!finite(doc.value)) continue;  // NaN is not equal to itself; JSON has no infinity
    const std::string yaml = podshaper::cli::toYaml(doc.value, doc.layout);
    auto back = podshaper::cli::readDocuments(yaml);
    FUZZ_CHECK(back.ok() && back->size() == 1 && back->front() == doc.value,
               show(doc.value) + " -> " + yaml + (back.ok() ? "" : " -> " + back.error().message));
    const std::string jsonText = podshaper::cli::toJson(doc.value, doc.layout);
    json parsed = json::parse(jsonText, nullptr, false);
    FUZZ_CHECK(!parsed.is_discarded() && parsed == doc.value, show(doc.value) + " -> " + jsonText);
    if (!doc.text.empty()) {
      // As review prints it in a stream: "---" before a document that has none.
      auto again = podshaper::cli::readDocuments(
          doc.text.starts_with("---") || doc.text.starts_with("%") || podshaper::cli::isJsonText(text)
              ? doc.text
              : "---\n" + doc.text);
      FUZZ_CHECK(again.ok() && again->size() == 1 && again->front() == doc.value, doc.text);
    }
  }
  return 0;
}
