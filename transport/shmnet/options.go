package shmnet

import (
	"time"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/transport"
)

// Option configures Open.
type Option func(*settings)

type settings struct {
	recvTimeout, stallTimeout, connectTimeout time.Duration
	ringSize                                  int
}

// Defaults: the receive, stall and connect timeouts are
// transport.DefaultRecvTimeout, DefaultStallTimeout and
// DefaultConnectTimeout, as grpcnet's.
const (
	// MinStallTimeout is the least stall timeout: the peers beat four
	// times in it.
	MinStallTimeout = 100 * time.Millisecond
	// DefaultRingSize is the size of each direction's ring, and of its
	// slab (at most 32 MiB): a message larger streams through the ring
	// while the receiver copies it out.
	DefaultRingSize = 8 << 20
	// minRingSize holds any header.
	minRingSize = 2 * maxHeader
)

// WithRecvTimeout bounds how long Recv waits for a message, and Close for
// its messages to be read, as grpcnet.WithRecvTimeout does.
func WithRecvTimeout(d time.Duration) Option { return func(s *settings) { s.recvTimeout = d } }

// WithStallTimeout bounds how long a peer may go without a heartbeat (the
// peers beat on the socket beside the ring four times per stall timeout)
// before its link is taken as broken: a process stopped (SIGSTOP) or hung
// is named within d. A peer that computes for long still beats.
func WithStallTimeout(d time.Duration) Option { return func(s *settings) { s.stallTimeout = d } }

// WithConnectTimeout bounds how long Open waits for every peer to connect
// and pass the handshake, counted from the call to Open.
func WithConnectTimeout(d time.Duration) Option {
	return func(s *settings) { s.connectTimeout = d }
}

// WithRingSize sets the size of the rings this peer creates (each
// direction of a link it dials has one, and a slab of the same size, at
// most 32 MiB), a power of two of at least 2 MiB.
func WithRingSize(bytes int) Option { return func(s *settings) { s.ringSize = bytes } }

func newSettings(opts []Option) (settings, error) {
	s := settings{recvTimeout: transport.DefaultRecvTimeout, stallTimeout: transport.DefaultStallTimeout, connectTimeout: transport.DefaultConnectTimeout, ringSize: DefaultRingSize}
	for _, o := range opts {
		o(&s)
	}
	if err := transport.CheckTimeouts(s.recvTimeout, s.stallTimeout, s.connectTimeout, MinStallTimeout, "the peers beat four times in it"); err != nil {
		return s, err
	}
	switch {
	case s.ringSize < minRingSize || s.ringSize&(s.ringSize-1) != 0:
		return s, errors.Errorf("ring size %d: a power of two of at least %d", s.ringSize, minRingSize)
	}
	return s, nil
}

// beat is how often a peer beats on the socket beside the ring.
func (s settings) beat() time.Duration { return s.stallTimeout / 4 }
