//go:build linux

package shmnet

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/pkg/errors"
	"golang.org/x/sys/unix"
)

// A ring carries one direction of a link: a byte stream in shared memory
// with one writer and one reader, in different processes. Its control
// block holds the positions both sides advance, and a flag per side that
// says it sleeps on its eventfd; a side that moves a position wakes the
// other only when that flag is set (both sides store, then load, with
// sequentially consistent atomics: one of them always sees the other).
// Positions only grow; position p is at p mod the ring's size.
const (
	offHead         = 0   // bytes written (the writer's)
	offTail         = 64  // bytes read (the reader's)
	offReaderAsleep = 128 // the reader waits for data
	offWriterAsleep = 192 // the writer waits for room
	offSlabBits     = 256 // the slab's bitmap (slab.go), slabWords words
	ctlSize         = 4096
)

// ring is one side's view of a ring.
type ring struct {
	ctl  []byte
	data []byte
	// data is signalled by the writer when it wrote, room by the reader
	// when it read.
	data1, room eventfd
	// stop, once set, makes a side that waits give up: the link ended.
	stop *atomic.Bool
	// slab is where the ring's large tensors lie (slab.go).
	slab slab
}

func (r *ring) word(off int) *uint64 { return (*uint64)(unsafe.Pointer(&r.ctl[off])) }

// errStopped is what a ring operation returns once the link ended.
var errStopped = errors.New("the link ended")

// ringLayout is the size of a link's shared memory: two rings of size
// bytes each, their control blocks and their slabs.
func ringLayout(size int) int { return 2 * (ctlSize + size + slabSize(size)) }

// rings cuts a link's shared memory into its two rings, each with its
// slab: the dialer writes the first, the acceptor the second. Every part
// starts on a page.
func rings(mem []byte, size int) (first, second *ring) {
	one := ctlSize + size + slabSize(size)
	at := func(off int) *ring {
		r := &ring{ctl: mem[off : off+ctlSize], data: mem[off+ctlSize : off+ctlSize+size]}
		r.slab.mem = mem[off+ctlSize+size : off+one]
		r.slab.bits = words(r.ctl[offSlabBits : offSlabBits+8*slabWords])
		return r
	}
	return at(0), at(one)
}

// publishEvery is the most a writer copies before it moves the head: a
// reader that is awake copies a large message out while the rest goes in.
const publishEvery = 64 << 10

// spinFor is how long a reader in the middle of a message waits for the
// rest before it sleeps: the writer is copying it in (publishEvery bytes
// take a few microseconds), and sleeping would cost a wake-up per piece.
// Between messages a reader sleeps at once (peerLink.read).
const spinFor = 50 * time.Microsecond

// free is how many bytes the writer can write without waiting.
func (r *ring) free() int {
	return len(r.data) - int(atomic.LoadUint64(r.word(offHead))-atomic.LoadUint64(r.word(offTail)))
}

// avail is how many bytes the reader can read without waiting.
func (r *ring) avail() uint64 {
	return atomic.LoadUint64(r.word(offHead)) - atomic.LoadUint64(r.word(offTail))
}

// peek copies into p the len(p) bytes that lie skip bytes past the
// reader's position, without reading them, and reports whether they are
// in the ring. Only the reader calls it.
func (r *ring) peek(p []byte, skip uint64) bool {
	size := uint64(len(r.data))
	tail := atomic.LoadUint64(r.word(offTail))
	avail := atomic.LoadUint64(r.word(offHead)) - tail
	if avail > size || skip+uint64(len(p)) > avail {
		return false
	}
	n := copy(p, r.data[(tail+skip)%size:])
	copy(p[n:], r.data)
	return true
}

// writeMessage copies a message's frame and parts into the ring, in order, waiting
// for room as long as it takes. It wakes a sleeping reader once the whole
// message is in, not per part: a reader between messages wakes once per
// message. It wakes it earlier only where the reader can start copying out
// while the rest goes in: as each publishEvery bytes of a large part are
// in, and before the writer waits for room.
func (r *ring) writeMessage(frame []byte, parts ...[]byte) error {
	end := len(parts) - 1 // the last part with bytes (an empty one writes nothing, so wakes no one)
	for end >= 0 && len(parts[end]) == 0 {
		end--
	}
	if err := r.write(frame, end < 0); err != nil {
		return err
	}
	for i, p := range parts[:end+1] {
		if err := r.write(p, i == end); err != nil {
			return err
		}
	}
	return nil
}

// write copies p into the ring, waiting for room as long as it takes; last
// says that p ends a message (writeMessage).
func (r *ring) write(p []byte, last bool) error {
	size := uint64(len(r.data))
	head := atomic.LoadUint64(r.word(offHead))
	for len(p) > 0 {
		used := head - atomic.LoadUint64(r.word(offTail))
		if used > size {
			return errors.Errorf("the ring's positions are corrupt (%d bytes in a ring of %d)", used, size)
		}
		if used == size {
			if err := r.sleep(offWriterAsleep, r.room, func() bool { return head-atomic.LoadUint64(r.word(offTail)) < size }); err != nil {
				return err
			}
			continue
		}
		off := head % size
		n := min(uint64(len(p)), size-used, size-off, publishEvery)
		copy(r.data[off:off+n], p[:n])
		head += n
		atomic.StoreUint64(r.word(offHead), head)
		p = p[n:]
		if len(p) == 0 && last || n == publishEvery || used+n == size { // the message is in, a large part is under way, or the writer waits for room next
			if err := r.wake(offReaderAsleep, r.data1); err != nil {
				return err
			}
		}
	}
	return nil
}

// read fills p, part of a message begun (the link's reader waits for a
// message to begin: peerLink.read), from the ring: its writer is copying
// the rest in, so it spins for spinFor, then waits as long as it takes.
// Once the link is stopped it still reads what was written before.
func (r *ring) read(p []byte) error {
	size := uint64(len(r.data))
	tail := atomic.LoadUint64(r.word(offTail))
	for len(p) > 0 {
		avail := atomic.LoadUint64(r.word(offHead)) - tail
		if avail > size {
			return errors.Errorf("the ring's positions are corrupt (%d bytes in a ring of %d)", avail, size)
		}
		if avail == 0 {
			moved := func() bool { return atomic.LoadUint64(r.word(offHead)) != tail }
			if spin(moved) {
				continue
			}
			if err := r.sleep(offReaderAsleep, r.data1, moved); err != nil {
				return err
			}
			continue
		}
		off := tail % size
		n := min(uint64(len(p)), avail, size-off)
		copy(p[:n], r.data[off:off+n])
		tail += n
		atomic.StoreUint64(r.word(offTail), tail)
		p = p[n:]
		if err := r.wake(offWriterAsleep, r.room); err != nil {
			return err
		}
	}
	return nil
}

// spin reports whether ready turned true within spinFor. It does not
// yield to the scheduler: a goroutine that yields in a loop keeps its P
// busy, so the runtime polls the network only from its monitor, every
// 10 ms, and other links' messages wait (docs/speed.md). In a process of
// one P its other goroutines wait at most spinFor.
func spin(ready func() bool) bool {
	for start := time.Now(); time.Since(start) < spinFor; {
		if ready() {
			return true
		}
	}
	return ready()
}

// sleep waits on ev until ready says the ring moved, or the link stops
// (what is ready is taken first: a reader drains what was written before
// the link stopped).
func (r *ring) sleep(flag int, ev eventfd, ready func() bool) error {
	for {
		if ready() {
			return nil
		}
		if r.stop.Load() {
			return errStopped
		}
		atomic.StoreUint64(r.word(flag), 1)
		if ready() {
			atomic.StoreUint64(r.word(flag), 0)
			return nil
		}
		err := ev.wait()
		atomic.StoreUint64(r.word(flag), 0)
		if err != nil && !r.stop.Load() {
			return errors.Wrap(err, "waiting on the ring's eventfd")
		}
	}
}

// wake signals ev if the other side sleeps on it.
func (r *ring) wake(flag int, ev eventfd) error {
	if atomic.LoadUint64(r.word(flag)) == 0 {
		return nil
	}
	return ev.signal()
}

// newSharedMemory creates an anonymous shared memory file (memfd) of size
// bytes and maps it; the caller closes the file once it has handed it on
// (the mapping keeps the memory).
func newSharedMemory(size int) (fd int, mem []byte, err error) {
	fd, err = unix.MemfdCreate("pipemare-ring", unix.MFD_CLOEXEC)
	if err != nil {
		return -1, nil, errors.Wrap(err, "memfd_create")
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return -1, nil, errors.Wrapf(err, "sizing the shared memory to %d bytes", size)
	}
	mem, err = mapShared(fd, size)
	if err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	return fd, mem, nil
}

// mapShared maps size bytes of the shared memory file fd, after checking
// that it has them, and brings them into memory at once (MAP_POPULATE):
// a ring's first pass would otherwise take a page fault per page on each
// side, a measurable share of a short training (docs/speed.md).
func mapShared(fd, size int) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, errors.Wrap(err, "fstat of the shared memory")
	}
	if st.Size != int64(size) {
		return nil, errors.Errorf("the shared memory has %d bytes, %d expected", st.Size, size)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	return mem, errors.Wrap(err, "mmap of the shared memory")
}
