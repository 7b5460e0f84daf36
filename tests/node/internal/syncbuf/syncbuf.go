// Package syncbuf is a strings.Builder that a child process (or a goroutine) writes
// while a test reads it.
package syncbuf

import (
	"strings"
	"sync"
)

// Buffer is safe for one writer and readers at once.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
