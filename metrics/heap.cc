#include "metrics/heap.h"

#include <malloc.h>

#include <cstdlib>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)  // clang's spelling
#define PODSHAPER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define PODSHAPER_ASAN 1
#endif

// gperftools' C interface (gperftools/malloc_extension_c.h), weak: null unless the binary
// runs on tcmalloc.
extern "C" {
void MallocExtension_ReleaseFreeMemory(void) __attribute__((weak));
int MallocExtension_GetNumericProperty(const char* property, size_t* value) __attribute__((weak));
}

namespace podshaper::metrics {

void giveFreedMemoryBack() {
#ifndef PODSHAPER_ASAN
  if (MallocExtension_ReleaseFreeMemory != nullptr) {
    MallocExtension_ReleaseFreeMemory();
  } else {
    // Under ASan glibc's arenas may never have been set up: malloc_trim would read them.
    malloc_trim(0);
  }
#endif
}

bool useFewArenas() {
#ifdef PODSHAPER_ASAN
  return false;
#else
  if (MallocExtension_ReleaseFreeMemory != nullptr) return false;  // tcmalloc: no arenas
  if (std::getenv("MALLOC_ARENA_MAX") != nullptr) return false;
  return mallopt(M_ARENA_MAX, 2) == 1;
#endif
}

std::optional<HeapBytes> heapBytes() {
#ifdef PODSHAPER_ASAN
  return std::nullopt;
#else
  HeapBytes h;
  if (MallocExtension_GetNumericProperty != nullptr) {
    size_t allocated = 0, pageheapFree = 0, central = 0, transfer = 0, thread = 0;
    MallocExtension_GetNumericProperty("generic.current_allocated_bytes", &allocated);
    MallocExtension_GetNumericProperty("tcmalloc.pageheap_free_bytes", &pageheapFree);
    MallocExtension_GetNumericProperty("tcmalloc.central_cache_free_bytes", &central);
    MallocExtension_GetNumericProperty("tcmalloc.transfer_cache_free_bytes", &transfer);
    MallocExtension_GetNumericProperty("tcmalloc.thread_cache_free_bytes", &thread);
    h.inUse = allocated;
    h.freeHeld = pageheapFree + central + transfer + thread;
    return h;
  }
  const struct mallinfo2 m = mallinfo2();
  h.inUse = m.uordblks + m.hblkhd;
  h.freeHeld = m.fordblks;
  return h;
#endif
}

}  // namespace podshaper::metrics
