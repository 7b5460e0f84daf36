#include "webhook/review.h"

#include <iostream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/flags.h"
#include "core/admission.h"
#include "core/base64.h"
#include "webhook/config_file.h"

namespace podshaper::webhook {
namespace {

// The request's pod with the response's patch applied, as the API server would store it.
nlohmann::json shapedPod(const std::string& input, const nlohmann::json& response) {
  nlohmann::json pod = nlohmann::json::parse(input)["request"].value("object", nlohmann::json());
  if (!response.contains("patch")) return pod;
  auto raw = base64Decode(response["patch"].get<std::string>());
  return pod.patch(nlohmann::json::parse(raw.ok() ? *raw : "[]"));
}

}  // namespace

int runReview(int argc, char** argv) {
  auto flags = cli::Flags::parse(argc, argv, 2, {"config", "output"});
  if (!flags) {
    std::cerr << "podshaper-webhook review: " << flags.error().message << "\n";
    return 2;
  }
  std::string output = flags->get("output", "review");
  if (output != "review" && output != "pod") {
    std::cerr << "podshaper-webhook review: --output must be review or pod\n";
    return 2;
  }
  auto config = loadConfig(flags->get("config"));
  if (!config) {
    std::cerr << "podshaper-webhook review: " << config.error().message << "\n";
    return 2;
  }
  std::string input{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  auto decision = admit(input, *config, nullptr, kShaperVersion);
  if (!decision) {
    std::cerr << "podshaper-webhook review: " << decision.error().message << "\n";
    return 2;
  }
  const nlohmann::json& response = decision->review["response"];
  if (output == "review") {
    std::cout << decision->review.dump(2) << "\n";
    return 0;
  }
  // --output pod: the pod on stdout; what kubectl would print on stderr.
  for (const auto& w : response.value("warnings", nlohmann::json::array())) {
    std::cerr << "Warning: " << w.get<std::string>() << "\n";
  }
  if (!decision->allowed) {
    std::cerr << "Error: denied: " << response["status"]["message"].get<std::string>() << "\n";
    return 0;
  }
  std::cout << shapedPod(input, response).dump(2) << "\n";
  return 0;
}

}  // namespace podshaper::webhook
