#include "metrics/process.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "metrics/heap.h"

namespace podshaper::metrics {
namespace {

// The fields of /proc/self/stat after the command's closing parenthesis (field 3 on).
std::vector<std::string> statFields() {
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> fields;
  const auto close = text.rfind(')');
  if (close == std::string::npos) return fields;
  std::istringstream rest(text.substr(close + 1));
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

double bootTime() {
  std::ifstream in("/proc/stat");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("btime ", 0) == 0) return std::stod(line.substr(6));
  }
  return 0;
}

double maxOpenFiles() {
  std::ifstream in("/proc/self/limits");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Max open files", 0) != 0) continue;
    std::istringstream fields(line.substr(14));
    std::string soft;
    fields >> soft;
    return soft == "unlimited" ? -1 : std::stod(soft);
  }
  return -1;
}

}  // namespace

void registerBuildInfo(Registry& registry, const std::string& component, const std::string& version) {
  registry.gauge("podshaper_build_info", "Which podshaper build this is: always 1.",
                 {{"component", component}, {"version", version}})
      .set(1);
}

void updateProcessMetrics(Registry& registry) {
  static std::mutex mu;  // the CPU counter is moved by the difference since the last look
  std::lock_guard lock(mu);
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  const auto f = statFields();
  // After ")": state is field 3, so field N is f[N - 3]: utime 14, stime 15, starttime 22, vsize 23, rss 24.
  if (f.size() >= 22 && ticks > 0) {
    Counter& cpu = registry.counter("process_cpu_seconds_total", "User and system CPU time the process spent, in seconds.");
    const double seconds = (std::stod(f[11]) + std::stod(f[12])) / ticks;
    if (seconds > cpu.value()) cpu.inc(seconds - cpu.value());
    registry.gauge("process_start_time_seconds", "When the process started, in seconds since the epoch.")
        .set(bootTime() + std::stod(f[19]) / ticks);
    registry.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.").set(std::stod(f[20]));
    registry.gauge("process_resident_memory_bytes", "Resident memory size in bytes.").set(std::stod(f[21]) * page);
  }
  std::error_code ec;
  double fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec); !ec && it != std::filesystem::end(it);
       it.increment(ec)) {
    ++fds;
  }
  if (!ec) registry.gauge("process_open_fds", "Open file descriptors.").set(fds);
  if (const double max = maxOpenFiles(); max >= 0) {
    registry.gauge("process_max_fds", "The most open file descriptors allowed.").set(max);
  }
  // glibc's count walks every arena (and consolidates its free chunks): at most every 5 s.
  static std::chrono::steady_clock::time_point heapAt;
  const auto now = std::chrono::steady_clock::now();
  if (now - heapAt < std::chrono::seconds(5)) return;
  heapAt = now;
  if (const auto heap = heapBytes()) {
    // Resident memory far above in_use is the allocator's, not podshaper's data.
    const char* help = "The allocator's heap in bytes: in use, and freed but held by the allocator.";
    registry.gauge("podshaper_heap_bytes", help, {{"state", "in_use"}}).set(static_cast<double>(heap->inUse));
    registry.gauge("podshaper_heap_bytes", help, {{"state", "free_held"}}).set(static_cast<double>(heap->freeHeld));
  }
}

}  // namespace podshaper::metrics
