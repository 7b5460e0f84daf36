#include "metrics/process.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <sstream>
#include <vector>

#include "metrics/heap.h"

namespace podshaper::metrics {
namespace {

// The value of the line "SERIES VALUE", or -1.
double sample(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

TEST(ProcessMetrics, BuildInfo) {
  Registry r;
  registerBuildInfo(r, "webhook", "0.1.0");
  EXPECT_NE(r.render().find("podshaper_build_info{component=\"webhook\",version=\"0.1.0\"} 1\n"), std::string::npos);
}

TEST(ProcessMetrics, TheProcessAsProcSaysIt) {
  Registry r;
  std::vector<char> held(64 << 20, 1);
  volatile double spin = 0;
  for (int i = 0; i < 20'000'000; ++i) spin = spin + i;  // some CPU time to count
  updateProcessMetrics(r);
  const std::string text = "\n" + r.render();
  EXPECT_GT(sample(text, "process_resident_memory_bytes"), 1 << 20) << text;
  EXPECT_GT(sample(text, "process_virtual_memory_bytes"), sample(text, "process_resident_memory_bytes"));
  EXPECT_GE(sample(text, "process_open_fds"), 3);
  EXPECT_GE(sample(text, "process_max_fds"), sample(text, "process_open_fds"));
  const double cpu = sample(text, "process_cpu_seconds_total");
  EXPECT_GT(cpu, 0);
  const double start = sample(text, "process_start_time_seconds");
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_LE(start, now + 1);
  EXPECT_GT(start, now - 3600);  // this test started within the hour
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter"), std::string::npos);
#if !defined(__SANITIZE_ADDRESS__)
  // The 64 MiB this test holds, in use by the allocator's count.
  EXPECT_GE(sample(text, "podshaper_heap_bytes{state=\"in_use\"}"), 64 << 20) << text;
  EXPECT_GE(sample(text, "podshaper_heap_bytes{state=\"free_held\"}"), 0) << text;
#endif
  updateProcessMetrics(r);  // a counter never goes down
  EXPECT_GE(sample("\n" + r.render(), "process_cpu_seconds_total"), cpu);
}

TEST(Heap, TwoArenasUnlessTheAdminChoseOtherwise) {
  setenv("MALLOC_ARENA_MAX", "4", 1);
  EXPECT_FALSE(useFewArenas());  // the environment's value stands
  unsetenv("MALLOC_ARENA_MAX");
  // glibc takes it; AddressSanitizer (no heap figures either) has no arenas to cap.
  EXPECT_EQ(useFewArenas(), heapBytes().has_value());
}

}  // namespace
}  // namespace podshaper::metrics
