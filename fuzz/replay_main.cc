// Runs a fuzz target's LLVMFuzzerTestOneInput over files, with any compiler and
// no libFuzzer: the corpora and every saved crasher stay regression tests in
// plain `make test` (ctest fuzz_replay_<target>).
//
//   fuzz_replay_<target> [--max-seconds-per-input S] DIR_OR_FILE...
//
// Directories are walked recursively; files whose names start with '.' are
// skipped. A missing path is an error (a typo must not pass as "0 inputs").
// A crash or a broken invariant aborts, after the input's path is printed; an
// input slower than S seconds (default 10) fails the run.

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

char currentInput[4096] = "";

void onFatalSignal(int sig) {
  const char* prefix = "fuzz_replay: crashed on input ";
  (void)!write(STDERR_FILENO, prefix, std::strlen(prefix));
  (void)!write(STDERR_FILENO, currentInput, std::strlen(currentInput));
  (void)!write(STDERR_FILENO, "\n", 1);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

bool hidden(const fs::path& p) { return p.filename().string().starts_with("."); }

}  // namespace

int main(int argc, char** argv) {
  double maxSeconds = 10;
  std::vector<fs::path> roots;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--max-seconds-per-input" && i + 1 < argc) {
      maxSeconds = std::atof(argv[++i]);
    } else if (arg.starts_with("-")) {
      std::fprintf(stderr, "usage: %s [--max-seconds-per-input S] DIR_OR_FILE...\n", argv[0]);
      return 2;
    } else {
      roots.emplace_back(arg);
    }
  }
  if (roots.empty()) {
    std::fprintf(stderr, "usage: %s [--max-seconds-per-input S] DIR_OR_FILE...\n", argv[0]);
    return 2;
  }

  std::vector<fs::path> inputs;
  for (const auto& root : roots) {
    std::error_code ec;
    if (fs::is_regular_file(root, ec)) {
      inputs.push_back(root);
    } else if (fs::is_directory(root, ec)) {
      for (const auto& entry : fs::recursive_directory_iterator(root)) {
        if (entry.is_regular_file() && !hidden(entry.path())) inputs.push_back(entry.path());
      }
    } else {
      std::fprintf(stderr, "fuzz_replay: %s: no such file or directory\n", root.c_str());
      return 2;
    }
  }
  std::sort(inputs.begin(), inputs.end());

  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, onFatalSignal);
  int slow = 0;
  for (const auto& path : inputs) {
    std::snprintf(currentInput, sizeof currentInput, "%s", path.c_str());
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // A copy of exactly the input's size, as libFuzzer gives: reads past the end are caught.
    auto* data = static_cast<uint8_t*>(std::malloc(bytes.empty() ? 1 : bytes.size()));
    if (!bytes.empty()) std::memcpy(data, bytes.data(), bytes.size());
    const auto start = std::chrono::steady_clock::now();
    LLVMFuzzerTestOneInput(data, bytes.size());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::free(data);
    if (seconds > maxSeconds) {
      std::fprintf(stderr, "fuzz_replay: %s took %.1f s (limit %.1f s)\n", path.c_str(), seconds, maxSeconds);
      ++slow;
    }
  }
  std::printf("fuzz_replay: %zu inputs, %d too slow\n", inputs.size(), slow);
  return slow == 0 ? 0 : 1;
}
