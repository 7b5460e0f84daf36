#pragma once

#include <csignal>

namespace podshaper::cli {

// Blocks SIGINT and SIGTERM in the calling thread (and every thread it starts
// afterwards) and returns them, for sigwait: call it before any thread starts,
// so that a stop signal is never delivered to some other thread and lost.
sigset_t blockStopSignals();

}  // namespace podshaper::cli
