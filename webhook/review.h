#pragma once

namespace podshaper::webhook {

// `podshaper-webhook review [--config FILE] [--output review|pod] < admissionreview.json`
int runReview(int argc, char** argv);

}  // namespace podshaper::webhook
