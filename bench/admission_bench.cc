// The webhook's work per request, in process: an AdmissionReview's bytes in, the
// response's bytes out (decode, shape, diff into a JSON Patch, encode). No TLS, no
// HTTP: what podshaper-webhook adds on top of its server.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>

#include "shaping/admission.h"

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void admitFile(benchmark::State& state, const std::string& path) {
  const std::string body = readFile(path);
  const podshaper::Config config;
  podshaper::AdmissionScratch scratch;
  if (body.empty()) {
    state.SkipWithError(("cannot read " + path).c_str());
    return;
  }
  for (auto _ : state) {
    auto decision = podshaper::admit(scratch, body, config, nullptr, "podshaper-webhook/bench");
    std::string out = decision->body();
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(body.size()));
}

void BM_AdmitRealisticPod(benchmark::State& state) { admitFile(state, PODSHAPER_BENCH_DIR "/inputs/realistic-pod.json"); }
void BM_AdmitSeedPod(benchmark::State& state) { admitFile(state, PODSHAPER_BENCH_DIR "/inputs/seed-pod.json"); }

// The two in turn: each review's tree is read into the other's (the AdmissionScratch keeps
// the last tree), the least the kept tree saves. Time per admission.
void BM_AdmitRealisticAndSeedInTurn(benchmark::State& state) {
  const std::string bodies[] = {readFile(PODSHAPER_BENCH_DIR "/inputs/realistic-pod.json"),
                                readFile(PODSHAPER_BENCH_DIR "/inputs/seed-pod.json")};
  const podshaper::Config config;
  podshaper::AdmissionScratch scratch;
  std::size_t turn = 0;
  for (auto _ : state) {
    const std::string& body = bodies[turn++ % 2];
    auto decision = podshaper::admit(scratch, body, config, nullptr, "podshaper-webhook/bench");
    std::string out = decision->body();
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(bodies[0].size() + bodies[1].size()) / 2);
}

BENCHMARK(BM_AdmitRealisticPod);
BENCHMARK(BM_AdmitSeedPod);
BENCHMARK(BM_AdmitRealisticAndSeedInTurn);

}  // namespace

BENCHMARK_MAIN();
