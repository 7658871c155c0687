package transport

import (
	"time"

	"github.com/pkg/errors"
)

// The network transports' (grpcnet's, shmnet's) defaults, the same for
// both so that a pipeline fails alike over either.
const (
	// DefaultRecvTimeout is how long a Recv waits for a message, and Close
	// for its messages to be delivered.
	DefaultRecvTimeout = 2 * time.Minute
	// DefaultStallTimeout is how long a peer may go without a sign of life
	// (an answer to a keepalive, a heartbeat) before its link is taken as
	// broken.
	DefaultStallTimeout = 30 * time.Second
	// DefaultConnectTimeout is how long Open waits for its peers to
	// connect and pass the handshake: long enough for processes started
	// together to build their model, short enough that a peer that never
	// comes is reported while someone is still watching.
	DefaultConnectTimeout = 30 * time.Second
)

// ErrConnectTimeout is what a network transport's Open error is
// (errors.Is) when a peer did not connect and pass the handshake within
// the connect timeout.
var ErrConnectTimeout = errors.New("transport: connect timeout")

// ConnectTimeoutError is Open's error when the connect timeout passed:
// what it says of each peer that did not connect. It is ErrConnectTimeout.
type ConnectTimeoutError struct{ Msg string }

func (e *ConnectTimeoutError) Error() string        { return e.Msg }
func (e *ConnectTimeoutError) Is(target error) bool { return target == ErrConnectTimeout }

// CheckTimeouts checks a network endpoint's receive, stall and connect
// timeouts; minStall is its transport's least stall timeout, and floor
// says why (added to the error).
func CheckTimeouts(recv, stall, connect, minStall time.Duration, floor string) error {
	switch {
	case recv <= 0:
		return errors.Errorf("receive timeout %v: it must be positive", recv)
	case stall < minStall:
		return errors.Errorf("stall timeout %v: it must be at least %v (%s)", stall, minStall, floor)
	case connect <= 0:
		return errors.Errorf("connect timeout %v: it must be positive", connect)
	}
	return nil
}
