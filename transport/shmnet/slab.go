//go:build linux

package shmnet

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/pkg/errors"
)

// A slab lies beside each ring: shared memory, in pages, where the writer
// puts a large tensor of an Activation or Gradient instead of in the ring,
// so that the receiver computes on it in place — one copy from the
// sender's tensor to the receiver's use, where the ring takes two (in, and
// out into a tensor of the receiver's). The ring carries the message's
// header, which names the tensor's first page.
//
// The pages' bitmap lies in the ring's control block. Only the writer
// sets bits (it takes a run of free pages as it encodes a message, under
// the link's encoding lock) and only the reader clears them (when the
// receiver returns the tensor: recycle.Put calls back, recycle.Lend), both
// with atomic operations, so neither ever waits for the other: a writer
// that finds no free run puts the tensor in the ring, as it does any
// other. Pages the receiver keeps thus never hold back the ring.
const (
	slabPage     = 64 << 10 // bytes
	slabMinBytes = slabPage // smaller tensors go in the ring
	slabWords    = 8        // of the bitmap: at most 512 pages, 32 MiB
)

// slabSize is the size of the slab beside a ring of size bytes.
func slabSize(ringSize int) int { return min(ringSize, slabWords*64*slabPage) }

// slab is one side's view of the slab beside a ring.
type slab struct {
	mem  []byte
	bits []uint64 // the pages' bitmap, in the ring's control block
}

func (s *slab) pages() int { return len(s.mem) / slabPage }

func (s *slab) word(i int) *uint64 { return &s.bits[i] }

// free reports whether page p is free.
func (s *slab) free(p int) bool {
	return atomic.LoadUint64(s.word(p/64))&(1<<(p%64)) == 0
}

// take finds the lowest n free pages in a row, marks them taken and
// returns the first; ok is false when there is no such run. The lowest:
// the pages a receiver just returned are taken again while they are in
// the caches (a writer that went round the slab spent 12–20 % more CPU
// copying, docs/speed.md). Only the writer calls it, one at a time.
func (s *slab) take(n int) (first int, ok bool) {
	total := s.pages()
	for start := 0; n > 0 && start+n <= total; {
		run := 0
		for run < n && s.free(start+run) {
			run++
		}
		if run == n {
			s.mark(start, n, true)
			return start, true
		}
		start += run + 1
	}
	return 0, false
}

// mark sets (taken) or clears the bits of pages [first, first+n).
func (s *slab) mark(first, n int, taken bool) {
	for p := first; p < first+n; {
		w := p / 64
		k := min(n-(p-first), 64-p%64)
		mask := (^uint64(0) >> (64 - k)) << (p % 64)
		if taken {
			atomic.OrUint64(s.word(w), mask)
		} else {
			atomic.AndUint64(s.word(w), ^mask)
		}
		p += k
	}
}

// pagesFor is how many pages n bytes take.
func pagesFor(n int) int { return (n + slabPage - 1) / slabPage }

// at returns the n bytes from page first, checking that they lie in the
// slab (a header that names pages outside it is corrupt).
func (s *slab) at(first uint32, n int) ([]byte, error) {
	if int(first) >= s.pages() || int(first)+pagesFor(n) > s.pages() {
		return nil, errors.Errorf("%d bytes from page %d of a slab of %d pages", n, first, s.pages())
	}
	off := int(first) * slabPage
	return s.mem[off : off+n : off+n], nil
}

// lending keeps a link's shared memory mapped while a tensor read in
// place from its incoming slab is lent out: the link releases its memory
// at Close (or when it ends) only once every lent tensor came back, since
// a tensor handed to the receiver points into it. Until then the memory
// stays mapped; the last tensor to come back unmaps it.
type lending struct {
	mu      sync.Mutex
	out     int    // tensors lent and not given back
	release func() // set once the link is done: unmaps, when out is 0
}

// lend counts one more tensor lent.
func (g *lending) lend() {
	g.mu.Lock()
	g.out++
	g.mu.Unlock()
}

// giveBack frees a returned tensor's pages (unless the link is done, when
// nobody writes the slab any more) and, if the link is done and this was
// the last one out, releases the memory.
func (g *lending) giveBack(s *slab, first, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.out--
	if g.release == nil {
		s.mark(first, n, false)
		return
	}
	if g.out == 0 {
		g.release()
	}
}

// done releases the memory now if nothing is lent, else when the last
// lent tensor comes back. It reports whether it released it now.
func (g *lending) done(release func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.release = release
	if g.out == 0 {
		release()
		return true
	}
	return false
}

// words views the bitmap's bytes in a control block as words.
func words(b []byte) []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
}
