package grpcnet

import (
	"crypto/tls"
	"net"
	"strings"
	"sync"

	"github.com/pkg/errors"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// serverCreds and clientCreds are the transport credentials of each side:
// mutual TLS 1.3, or plaintext when asked for on loopback.
func (s settings) serverCreds() credentials.TransportCredentials {
	if s.insecure {
		return insecure.NewCredentials()
	}
	return batchedCreds{credentials.NewTLS(&tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{*s.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    s.roots,
	})}
}

// clientCreds checks the server's certificate against the host dialed
// (grpc sets the server name from the target's authority), and waits for
// the server's verdict on this peer's (verdictCreds).
func (s settings) clientCreds() credentials.TransportCredentials {
	if s.insecure {
		return insecure.NewCredentials()
	}
	return verdictCreds{batchedCreds{credentials.NewTLS(&tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{*s.cert},
		RootCAs:      s.roots,
	})}}
}

// checkInsecure refuses plaintext unless every address is loopback.
func checkInsecure(addrs []string) error {
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			return errors.Wrapf(err, "address %q", a)
		}
		if !isLoopback(host) {
			return errors.Errorf("plaintext refused: %s is not a loopback address; use WithTLS (package pki writes certificates for trying it)", a)
		}
	}
	return nil
}

// Loopback reports whether addr (host:port) is a loopback address: one
// WithInsecure allows.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && isLoopback(host)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// refusals records the last connection a stage's server refused at the TLS
// handshake, so that an Open that times out waiting for a peer can say why
// the peer never arrived. A client that hangs up during the handshake was
// not refused (a dial given up, a TCP health check): it is not recorded,
// and does not hide the refusal that explains a missing peer.
type refusals struct {
	credentials.TransportCredentials
	last *lastError
}

type lastError struct {
	mu  sync.Mutex
	err error
}

func newRefusals(c credentials.TransportCredentials) *refusals {
	return &refusals{TransportCredentials: c, last: &lastError{}}
}

func (r *refusals) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := r.TransportCredentials.ServerHandshake(c)
	if err != nil && !hungUp(err) {
		r.last.mu.Lock()
		r.last.err = errors.Wrapf(err, "refused a connection from %v", c.RemoteAddr())
		r.last.mu.Unlock()
	}
	return conn, info, err
}

func (r *refusals) Clone() credentials.TransportCredentials {
	return &refusals{TransportCredentials: r.TransportCredentials.Clone(), last: r.last}
}

func (r *refusals) lastRefusal() error {
	r.last.mu.Lock()
	defer r.last.mu.Unlock()
	return r.last.err
}

// permanent reports whether a dial error cannot go away by retrying: a
// certificate that does not verify, or was refused.
func permanent(err error) bool {
	s := err.Error()
	return strings.Contains(s, "tls:") || strings.Contains(s, "x509:")
}
