package transport

import (
	"context"
	"encoding/gob"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOrderPerSenderAndKind: messages of one kind from one peer arrive in
// the order they were sent, whatever else is queued in between.
func TestOrderPerSenderAndKind(t *testing.T) {
	ctx := context.Background()
	l := NewLocal(3)
	defer l.Close()
	s0, s1, s2 := l.Endpoint(0), l.Endpoint(1), l.Endpoint(2)
	for m := 0; m < 5; m++ {
		require.NoError(t, s0.Send(ctx, Message{Kind: Activation, To: 2, Micro: m}))
		require.NoError(t, s1.Send(ctx, Message{Kind: Activation, To: 2, Micro: 100 + m}))
		require.NoError(t, s1.Send(ctx, Message{Kind: Gradient, To: 2, Micro: 200 + m}))
	}
	for m := 0; m < 5; m++ {
		g, err := s2.Recv(ctx, 1, Gradient)
		require.NoError(t, err)
		require.Equal(t, 200+m, g.Micro)
		require.Equal(t, Peer(1), g.From, "Send stamps the sender")
	}
	for m := 0; m < 5; m++ {
		a, err := s2.Recv(ctx, 1, Activation)
		require.NoError(t, err)
		require.Equal(t, 100+m, a.Micro)
	}
	for m := 0; m < 5; m++ {
		a, err := s2.Recv(ctx, 0, Activation)
		require.NoError(t, err)
		require.Equal(t, m, a.Micro)
	}
}

// TestAnyPeerTakesTheEarliest: the driver collects replies in arrival order.
func TestAnyPeerTakesTheEarliest(t *testing.T) {
	ctx := context.Background()
	l := NewLocal(2)
	defer l.Close()
	require.NoError(t, l.Endpoint(1).Send(ctx, Message{Kind: Reply, To: Driver, Body: "b"}))
	require.NoError(t, l.Endpoint(0).Send(ctx, Message{Kind: Reply, To: Driver, Body: "a"}))
	d := l.Endpoint(Driver)
	m, err := d.Recv(ctx, AnyPeer, Reply)
	require.NoError(t, err)
	require.Equal(t, "b", m.Body)
	require.Equal(t, Peer(1), m.From)
	m, err = d.Recv(ctx, AnyPeer, Reply)
	require.NoError(t, err)
	require.Equal(t, "a", m.Body)
}

// TestRecvWaits: Recv waits for a message sent later, and stops when its
// context ends.
func TestRecvWaits(t *testing.T) {
	l := NewLocal(1)
	defer l.Close()
	got := make(chan Message)
	go func() {
		m, err := l.Endpoint(0).Recv(context.Background(), Driver, Control)
		if err == nil {
			got <- m
		}
		close(got)
	}()
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, l.Endpoint(Driver).Send(context.Background(), Message{Kind: Control, To: 0, Body: 7}))
	m := <-got
	require.Equal(t, 7, m.Body)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := l.Endpoint(0).Recv(ctx, Driver, Control)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestCloseFailsPendingAndLaterCalls: a closed endpoint wakes its waiting
// receivers with ErrClosed, refuses to send, and a sender to it gets a
// LinkError naming the link.
func TestCloseFailsPendingAndLaterCalls(t *testing.T) {
	ctx := context.Background()
	l := NewLocal(2)
	defer l.Close()
	errc := make(chan error)
	go func() {
		_, err := l.Endpoint(1).Recv(ctx, 0, Activation)
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, l.Endpoint(1).Close())
	require.NoError(t, l.Endpoint(1).Close(), "twice is fine")
	require.ErrorIs(t, <-errc, ErrClosed)
	require.ErrorIs(t, l.Endpoint(1).Send(ctx, Message{Kind: Gradient, To: 0}), ErrClosed)
	err := l.Endpoint(0).Send(ctx, Message{Kind: Activation, To: 1})
	var le *LinkError
	require.ErrorAs(t, err, &le)
	require.Equal(t, Peer(0), le.From)
	require.Equal(t, Peer(1), le.To)
	require.Contains(t, err.Error(), "link stage 0 → stage 1 (activation)")
}

func TestUnknownPeer(t *testing.T) {
	l := NewLocal(2)
	defer l.Close()
	require.Nil(t, l.Endpoint(5))
	err := l.Endpoint(0).Send(context.Background(), Message{Kind: Activation, To: 5})
	require.ErrorContains(t, err, "link stage 0 → stage 5 (activation): no such peer (the transport has a driver and 2 stages)")
}

// TestConcurrentTraffic: many senders and receivers at once (run with
// -race); every message arrives once, in order per sender.
func TestConcurrentTraffic(t *testing.T) {
	ctx := context.Background()
	const stages, msgs = 4, 200
	l := NewLocal(stages)
	defer l.Close()
	var wg sync.WaitGroup
	for s := 0; s < stages-1; s++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for m := 0; m < msgs; m++ {
				if err := l.Endpoint(Peer(s)).Send(ctx, Message{Kind: Activation, To: stages - 1, Micro: m}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for m := 0; m < msgs; m++ {
				got, err := l.Endpoint(stages-1).Recv(ctx, Peer(s), Activation)
				if err != nil || got.Micro != m {
					t.Errorf("from stage %d: got %v, %v; want microbatch %d", s, got, err, m)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestBody: a registered body survives EncodeBody and DecodeBody; an
// unregistered one is an error that says to register it; no body is no
// bytes.
func TestBody(t *testing.T) {
	gob.Register(bodyNote{})
	b, err := EncodeBody(bodyNote{"x"})
	require.NoError(t, err)
	got, err := DecodeBody(b)
	require.NoError(t, err)
	require.Equal(t, bodyNote{"x"}, got)
	_, err = EncodeBody(struct{ Y int }{1})
	require.ErrorContains(t, err, "is it registered with gob.Register?")
	b, err = EncodeBody(nil)
	require.NoError(t, err)
	require.Empty(t, b)
	got, err = DecodeBody(nil)
	require.NoError(t, err)
	require.Nil(t, got)
	require.Equal(t, "driver, stage 1", PeerList([]Peer{Driver, 1}))
	require.Equal(t, "no peer", PeerList(nil))
}

type bodyNote struct{ S string }

// TestTakeWithin: a wait ends at its timeout (ErrTimeout), when the peer
// departs (ErrDeparted) or a link breaks (its LinkError, of the kind
// waited for), and with the caller's context; a message that arrived
// before still comes first.
func TestTakeWithin(t *testing.T) {
	ctx := context.Background()
	b := NewMailbox()
	_, err := b.TakeWithin(ctx, 1, Reply, Wait{Timeout: 10 * time.Millisecond})
	require.Equal(t, ErrTimeout, err)

	departed, depart := context.WithCancel(ctx)
	require.NoError(t, b.Put(Message{Kind: Reply, From: 1, Micro: 7}))
	depart()
	m, err := b.TakeWithin(ctx, 1, Reply, Wait{Timeout: time.Minute, Departed: departed})
	require.NoError(t, err)
	require.Equal(t, 7, m.Micro, "what came before the peer left")
	_, err = b.TakeWithin(ctx, 1, Reply, Wait{Timeout: time.Minute, Departed: departed})
	require.Equal(t, ErrDeparted, err)

	broken, breakIt := context.WithCancelCause(ctx)
	breakIt(&LinkError{From: 1, To: 0, Err: ErrClosed})
	_, err = b.TakeWithin(ctx, 1, Gradient, Wait{Timeout: time.Minute, Broken: broken})
	var le *LinkError
	require.ErrorAs(t, err, &le)
	require.Equal(t, Gradient, le.Kind, "the broken link's error, of the kind waited for")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = b.TakeWithin(cctx, 1, Reply, Wait{Timeout: time.Minute})
	require.ErrorIs(t, err, context.Canceled)
	b.Fail(ErrClosed)
	_, err = b.TakeWithin(ctx, 1, Reply, Wait{Timeout: time.Minute})
	require.ErrorIs(t, err, ErrClosed)
}
