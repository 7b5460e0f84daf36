#pragma once

// podshaper-webhook check: does the API server really call the webhook? It asks the API
// server to create (dry run: nothing is stored) a pod that opts in and asks one GPU, and
// reads the answer: shaped by podshaper-webhook, or denied by it, means the webhook
// answered; created unshaped or "failed calling webhook" means it did not. What
// `helm test` runs (charts/podshaper/templates/tests/). Exits 0 when the webhook answered,
// 1 when not, 2 on bad flags.

#include <string>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "kube/api_result.h"

namespace podshaper::webhook {

// The dry-run pod: opted in, one GPU, no DataLoader or NCCL to size.
nlohmann::json checkPod(const std::string& ns);

// What the API server's answer to creating checkPod says: what the webhook did (a line
// for the user), or why the webhook was not called.
Result<std::string> judgeCheck(const kube::ApiResult<nlohmann::json>& created);

int runCheck(int argc, char** argv);

}  // namespace podshaper::webhook
