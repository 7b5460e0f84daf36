#pragma once

#include <csignal>

namespace podshaper::cli {

// Blocks SIGINT and SIGTERM in the calling thread (and every thread it starts
// afterwards) and returns them, for sigwait: call it before any thread starts,
// so that a stop signal is never delivered to some other thread and lost.
sigset_t blockStopSignals();

// Waits for one of `signals` and returns it. Meanwhile, every 10 s, gives the pages the
// allocator holds freed back to the kernel (metrics/heap.h): a long-running process's
// watch events and reconciles parse and free all day, and neither glibc nor tcmalloc
// returns those pages by itself soon.
int waitForStopSignal(const sigset_t& signals);

}  // namespace podshaper::cli
