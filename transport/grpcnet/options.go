package grpcnet

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"time"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/transport"
)

// Option configures Open.
type Option func(*settings)

type settings struct {
	roots          *x509.CertPool
	cert           *tls.Certificate
	insecure       bool
	listener       net.Listener
	listenAddr     string
	recvTimeout    time.Duration
	stallTimeout   time.Duration
	connectTimeout time.Duration
	chunk          int
}

// Defaults: the receive, stall and connect timeouts are
// transport.DefaultRecvTimeout, DefaultStallTimeout and
// DefaultConnectTimeout.
const (
	// MinStallTimeout is the least stall timeout: gRPC pings a server at
	// most every 10 s, and the ping's answer needs a second more.
	MinStallTimeout = minPing + time.Second
	// chunkSize is the largest piece of a tensor in one frame.
	chunkSize = 1 << 20
	// frameSlack is the room a frame has beyond its chunk for the header:
	// shapes, dtypes, checksums and field tags.
	frameSlack = 1 << 20
)

// WithTLS secures every link with mutual TLS 1.3: the peers verify each
// other's certificate against roots (the CA the user names), present cert,
// and a dialing peer checks that the certificate of the stage it dials
// names the host it dialed. It is required whenever an address is not
// loopback (package pki writes a CA and certificates for trying it).
func WithTLS(roots *x509.CertPool, cert tls.Certificate) Option {
	return func(s *settings) { s.roots, s.cert = roots, &cert }
}

// WithInsecure runs every link in plaintext. Open refuses it unless every
// address it dials or listens on is loopback.
func WithInsecure() Option { return func(s *settings) { s.insecure = true } }

// WithListener makes a stage serve on l instead of listening on its address
// in the Network. The endpoint owns l: Close closes it.
func WithListener(l net.Listener) Option { return func(s *settings) { s.listener = l } }

// WithListenAddr makes a stage listen on addr (":7000": every interface, as
// in a pod) instead of its address in the Network.
func WithListenAddr(addr string) Option { return func(s *settings) { s.listenAddr = addr } }

// WithRecvTimeout bounds how long Recv waits for a message (a peer that
// sends nothing for longer is taken as stalled: Recv returns a
// *transport.LinkError) and how long Close waits for the messages it
// flushes to be received. It must exceed the longest compute between two
// messages a peer waits for.
func WithRecvTimeout(d time.Duration) Option { return func(s *settings) { s.recvTimeout = d } }

// WithStallTimeout bounds how long a peer may go silent, not even
// answering the transport's keepalive pings, before its link is taken as
// broken: a process that is stopped (SIGSTOP), hung or whose host froze
// is noticed within d, and the calls that involve its link fail with a
// *transport.LinkError that says it is stopped or stalled. A peer that
// computes for long still answers the pings: d need not cover its work
// (the receive timeout does). d is at least MinStallTimeout.
func WithStallTimeout(d time.Duration) Option { return func(s *settings) { s.stallTimeout = d } }

// WithConnectTimeout bounds how long Open waits for every peer to connect
// and pass the handshake (a stage also waits for the peers that dial it),
// counted from the call to Open: a peer that is not running, stalls in the
// handshake or was refused makes Open fail after d, naming it (the error is
// transport.ErrConnectTimeout). Peers started at very different times (pods waiting
// for their image) need a d that covers the gap.
func WithConnectTimeout(d time.Duration) Option {
	return func(s *settings) { s.connectTimeout = d }
}

func newSettings(opts []Option) (settings, error) {
	s := settings{recvTimeout: transport.DefaultRecvTimeout, stallTimeout: transport.DefaultStallTimeout, connectTimeout: transport.DefaultConnectTimeout, chunk: chunkSize}
	for _, o := range opts {
		o(&s)
	}
	if err := transport.CheckTimeouts(s.recvTimeout, s.stallTimeout, s.connectTimeout, MinStallTimeout, fmt.Sprintf("gRPC pings a peer at most every %v", minPing)); err != nil {
		return s, err
	}
	switch {
	case s.insecure && s.cert != nil:
		return s, errors.New("WithInsecure and WithTLS: choose one")
	case !s.insecure && s.cert == nil:
		return s, errors.New("no credentials: give WithTLS (required when an address is not loopback), or WithInsecure when every address is loopback")
	case s.cert != nil && s.roots == nil:
		return s, errors.New("WithTLS: no CA to verify the peers' certificates against")
	case s.listener != nil && s.listenAddr != "":
		return s, errors.New("WithListener and WithListenAddr: choose one")
	}
	return s, nil
}

// maxFrame is the largest frame a peer sends or accepts: a chunk and its
// header (grpc-go's default of 4 MiB would refuse a 4 MiB tensor and its
// header).
func (s settings) maxFrame() int { return s.chunk + frameSlack }
