// What reading one list page costs an informer: item by item (kube::readListPage, each
// item parsed alone) against the whole page parsed into one tree first and its items
// taken from it (JsonReader::read, as the API client read pages before). CPU time of the calling
// thread and the heap's peak above the page's text while reading, every item dropped
// once read (an informer keeps it packed, which costs both ways the same).
//
//   list_page_cost --page FILE [--page FILE...] [--min-seconds S]
//
// FILE: a List object's JSON text (scripts/bench/run.sh writes pages of the bench's GPU
// Nodes). The heap is counted by this program's operator new (glibc malloc underneath).
// Exit status 1 when item by item is not cheaper in both.
#include <malloc.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/json_parse.h"
#include "kube/protocol.h"

namespace {

std::atomic<std::size_t> gLive{0};
std::atomic<std::size_t> gPeak{0};

void* counted(void* p) {
  if (p == nullptr) throw std::bad_alloc();
  const std::size_t now = gLive.fetch_add(malloc_usable_size(p)) + malloc_usable_size(p);
  std::size_t peak = gPeak.load();
  while (now > peak && !gPeak.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void uncounted(void* p) {
  if (p == nullptr) return;
  gLive.fetch_sub(malloc_usable_size(p));
  std::free(p);
}

}  // namespace

void* operator new(std::size_t n) { return counted(std::malloc(n == 0 ? 1 : n)); }
void* operator new[](std::size_t n) { return counted(std::malloc(n == 0 ? 1 : n)); }
void* operator new(std::size_t n, std::align_val_t a) {
  return counted(std::aligned_alloc(static_cast<std::size_t>(a), (n + static_cast<std::size_t>(a) - 1) &
                                                                     ~(static_cast<std::size_t>(a) - 1)));
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return operator new(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return operator new(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { uncounted(p); }
void operator delete[](void* p) noexcept { uncounted(p); }
void operator delete(void* p, std::size_t) noexcept { uncounted(p); }
void operator delete[](void* p, std::size_t) noexcept { uncounted(p); }
void operator delete(void* p, std::align_val_t) noexcept { uncounted(p); }
void operator delete[](void* p, std::align_val_t) noexcept { uncounted(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { uncounted(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { uncounted(p); }

namespace {

using nlohmann::json;
namespace kube = podshaper::kube;

double threadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct Cost {
  double seconds = 0;     // CPU per read
  std::size_t peak = 0;   // heap bytes above what was live before the first read
  std::size_t items = 0;
};

// Reads the page until minSeconds of CPU have passed; the peak is the first read's.
template <typename Read>
Cost measure(double minSeconds, Read read) {
  Cost cost;
  const std::size_t before = gLive.load();
  gPeak.store(before);
  int rounds = 0;
  const double start = threadCpuSeconds();
  do {
    cost.items = read();
    if (rounds++ == 0) cost.peak = gPeak.load() - before;
  } while (threadCpuSeconds() - start < minSeconds);
  cost.seconds = (threadCpuSeconds() - start) / rounds;
  return cost;
}

double mib(std::size_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> pages;
  double minSeconds = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--page" && i + 1 < argc) {
      pages.emplace_back(argv[++i]);
    } else if (arg == "--min-seconds" && i + 1 < argc) {
      minSeconds = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: list_page_cost --page FILE [--page FILE...] [--min-seconds S]\n");
      return 2;
    }
  }
  if (pages.empty()) {
    std::fprintf(stderr, "list_page_cost: no --page given\n");
    return 2;
  }
  bool cheaper = true;
  podshaper::JsonReader reader;  // one for every page, as a list keeps one for its pages
  for (const auto& path : pages) {
    std::ifstream in(path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();
    if (!in || text.empty()) {
      std::fprintf(stderr, "list_page_cost: %s: cannot read it\n", path.c_str());
      return 2;
    }
    bool failed = false;
    const Cost whole = measure(minSeconds, [&] {
      auto tree = reader.read(text, kube::kMaxObjectDepth);
      if (!tree) failed = true;
      std::size_t n = 0;
      for (auto& item : (*tree)["items"]) n += item.is_object() ? 1 : 0;
      podshaper::freeTree(*tree);
      return n;
    });
    const Cost byItem = measure(minSeconds, [&] {
      std::size_t n = 0;
      auto page = kube::readListPage(reader, text, kube::kMaxObjectDepth, [&](json&& item) { n += item.is_object() ? 1 : 0; });
      if (!page) failed = true;
      return n;
    });
    if (failed || whole.items != byItem.items) {
      std::fprintf(stderr, "list_page_cost: %s: not a list page both ways read alike\n", path.c_str());
      return 2;
    }
    const bool ok = byItem.seconds < whole.seconds && byItem.peak < whole.peak;
    cheaper = cheaper && ok;
    std::printf(
        "list page of %zu items, %.2f MiB of text (%zu bytes an item): whole page's tree %.2f ms, heap peak %.2f MiB; "
        "item by item %.2f ms, heap peak %.2f MiB: %.2fx the time, %.3fx the peak%s\n",
        byItem.items, mib(text.size()), text.size() / std::max<std::size_t>(byItem.items, 1), whole.seconds * 1e3,
        mib(whole.peak), byItem.seconds * 1e3, mib(byItem.peak), byItem.seconds / whole.seconds,
        static_cast<double>(byItem.peak) / static_cast<double>(std::max<std::size_t>(whole.peak, 1)), ok ? "" : " !");
  }
  return cheaper ? 0 : 1;
}
