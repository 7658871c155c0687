//go:build linux

package shmnet

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/transport"
)

// TestGivingUpTellsAPeerInTheHandshakeWhy: a stage that gives up opening
// its links (here its caller cancels, as a stage does once another peer
// refused it) answers a peer that dialed in and has not yet said hello
// with the cause, instead of resetting its connection; a hello sent after
// that fails, and the refusal is still there to read.
func TestGivingUpTellsAPeerInTheHandshakeWhy(t *testing.T) {
	n := testNetwork(1)
	ctx, cancel := context.WithCancelCause(context.Background())
	opened := make(chan error, 1)
	go func() {
		e, err := Open(ctx, 0, n, quick(time.Second)...)
		if e != nil {
			e.Close()
		}
		opened <- err
	}()
	c := dialUntilListening(t, n.socket(0))
	defer c.Close()
	// Stage 0 has taken the connection and waits for the hello, or it is
	// still in line: either way it is answered.
	time.Sleep(50 * time.Millisecond)
	cancel(errors.New("test: stage 1 refused this stage"))
	require.Error(t, <-opened)

	reply, fds, err := recvHello(c, time.Now().Add(5*time.Second))
	closeFDs(fds)
	require.NoError(t, err, "the peer is answered, not reset")
	require.Equal(t, "stage 0 gave up opening its links: test: stage 1 refused this stage", reply.Refused)
	require.Error(t, sendHello(c, hello{Wire: wireVersion, Peer: int(transport.Driver)}, nil, time.Now().Add(time.Second)), "stage 0 reads no more")
}

// TestARefusalBeforeTheHelloIsRead: a peer that refuses a dialer before
// reading its hello (answerNo) makes the dialer's hello fail; the dialer
// still reports the refusal, not a connection that broke off.
func TestARefusalBeforeTheHelloIsRead(t *testing.T) {
	n := testNetwork(1)
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: n.socket(0), Net: "unixpacket"})
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.AcceptUnix()
		if err == nil {
			answerNo(c, "test: another run")
		}
	}()
	_, err = Open(context.Background(), transport.Driver, n, quick(time.Second)...)
	require.Error(t, err)
	require.Regexp(t, `stage 0 \(pid \d+\) refused the handshake: test: another run`, err.Error())
}

// dialUntilListening connects to socket once a peer listens there.
func dialUntilListening(t *testing.T, socket string) *net.UnixConn {
	t.Helper()
	for range 250 {
		c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: socket, Net: "unixpacket"})
		if err == nil {
			return c
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nothing listens at %s after 5s", socket)
	return nil
}

// TestTurnedAwayForWhatFailed: a peer turned away after this endpoint gave
// up is told the failure it gave up for — another link's (a stage that
// died in its handshake), a refusal — not that the peers it was still
// waiting for did not connect, which is only the cause at the connect
// timeout.
func TestTurnedAwayForWhatFailed(t *testing.T) {
	e := &Endpoint{self: 0}
	missed := &unanswered{"driver did not connect to stage 0 (are they running, and given the same run?)"}
	died := errors.New("the handshake with stage 1 (pid 7) broke off (its process may have died)")
	refused := errors.New("refused a peer: another run")
	gaveUp := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want error
	}{
		{"another link failed while a peer was missing", gaveUp(died), missed, died},
		{"the connect timeout passed", gaveUp(errConnectDeadline), missed, missed},
		{"a peer that dialed in was refused", gaveUp(died), refused, refused},
		{"given up with nothing missing", gaveUp(died), nil, died},
		{"the timeout, nothing missing", gaveUp(errConnectDeadline), nil, errConnectDeadline},
	} {
		require.Equal(t, c.want, e.whyTurnedAway(c.ctx, c.err), c.name)
	}
	require.ErrorContains(t, e.whyTurnedAway(context.Background(), nil), "every peer that dials stage 0 is connected already")
}
