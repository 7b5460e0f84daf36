#pragma once

#include <cstddef>
#include <optional>

// The allocator's heap, whichever malloc the binary runs on: podshaper-webhook links
// tcmalloc_minimal (faster for JSON's many small allocations), the operator and the agent
// glibc's. Both keep freed pages unless told to give them back: after a list of 100,000
// ResourceClaims or 12,500 Nodes, that peak would stay resident.
namespace podshaper::metrics {

// Gives the pages the allocator holds free back to the kernel (tcmalloc's
// ReleaseFreeMemory, else glibc's malloc_trim). Nothing under AddressSanitizer, whose
// allocator is its own.
void giveFreedMemoryBack();

// Caps glibc's malloc arenas at 2 (M_ARENA_MAX), unless MALLOC_ARENA_MAX is set in the
// environment (the admin's choice wins). glibc gives each thread that contends an arena of
// its own, up to 8 per core, and each keeps what its thread freed: the operator's informer
// and worker threads after a 12,500-node catch-up held 115 MiB freed beside 84 MiB in use
// (RSS 183–227 MiB); with two arenas 47 MiB (RSS 118 MiB), at the same CPU. Call first
// in main, before threads start. False where it did nothing: the variable set, tcmalloc,
// or AddressSanitizer.
bool useFewArenas();

struct HeapBytes {
  std::size_t inUse = 0;      // allocated and not freed
  std::size_t freeHeld = 0;   // freed, still held by the allocator (resident or not)
};
// What the allocator says of its heap; nullopt under AddressSanitizer.
std::optional<HeapBytes> heapBytes();

}  // namespace podshaper::metrics
