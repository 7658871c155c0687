//go:build linux

package shmnet

import (
	"encoding/binary"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestRingWakesOncePerMessage: a reader asleep between messages is
// signalled once per message, whatever its parts (header, body, tensors),
// and while a part larger than publishEvery goes in, so that it copies out
// what is in meanwhile. A signal is an eventfd write and a wake-up of the
// reader's process.
func TestRingWakesOncePerMessage(t *testing.T) {
	h, fds, err := makeShared(1 << 20)
	require.NoError(t, err)
	t.Cleanup(func() { h.release(); closeFDs(fds[:1]) })
	w, _ := rings(h.mem, 1<<20)
	w.data1, w.room, w.stop = newEventfd(h.evs[0]), newEventfd(h.evs[1]), new(atomic.Bool)
	signals := func() uint64 { // the eventfd's count, which reading resets
		var b [8]byte
		if _, err := unix.Read(fds[1], b[:]); err == unix.EAGAIN {
			return 0
		} else {
			require.NoError(t, err)
		}
		return binary.NativeEndian.Uint64(b[:])
	}
	atomic.StoreUint64(w.word(offReaderAsleep), 1) // the reader sleeps
	small := make([]byte, 100)
	require.NoError(t, w.writeMessage(make([]byte, 40), small, small, small))
	require.Equal(t, uint64(1), signals(), "a message of four parts signals its sleeping reader once")
	require.NoError(t, w.writeMessage(make([]byte, 5)))
	require.Equal(t, uint64(1), signals(), "a frame alone signals once")
	require.NoError(t, w.writeMessage(make([]byte, 40), small, nil, []byte{}))
	require.Equal(t, uint64(1), signals(), "a message whose last parts are empty signals once")
	require.NoError(t, w.writeMessage(make([]byte, 40), make([]byte, 3*publishEvery+1)))
	require.Equal(t, uint64(4), signals(), "a large part signals as each publishEvery bytes are in, and at the message's end")
	atomic.StoreUint64(w.word(offReaderAsleep), 0) // the reader is awake
	require.NoError(t, w.writeMessage(make([]byte, 40), small))
	require.Equal(t, uint64(0), signals(), "an awake reader is not signalled")
}
