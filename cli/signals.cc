#include "cli/signals.h"

#include <pthread.h>

#include <ctime>

#include "metrics/heap.h"

namespace podshaper::cli {

sigset_t blockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

int waitForStopSignal(const sigset_t& signals) {
  const timespec every{10, 0};
  while (true) {
    const int signal = sigtimedwait(&signals, nullptr, &every);
    if (signal > 0) return signal;
    metrics::giveFreedMemoryBack();  // the timeout, or another signal
  }
}

}  // namespace podshaper::cli
