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

struct HeapBytes {
  std::size_t inUse = 0;      // allocated and not freed
  std::size_t freeHeld = 0;   // freed, still held by the allocator (resident or not)
};
// What the allocator says of its heap; nullopt under AddressSanitizer.
std::optional<HeapBytes> heapBytes();

}  // namespace podshaper::metrics
