package grpcnet

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/pipemare/pipemare/internal/faultpoint"
	"github.com/pipemare/pipemare/transport"
)

// TestHandshakeRefusesMismatches: a peer that cut the model differently,
// runs with another setting, another number of stages or other links, or
// is not the stage its address names is refused, and the error says what
// differs.
func TestHandshakeRefusesMismatches(t *testing.T) {
	fpA, fpB := strings.Repeat("a", 64), strings.Repeat("b", 64)
	for _, tc := range []struct {
		name   string
		mutate func(driver *Network)
		want   string // in the driver's error
	}{
		{"fingerprint", func(n *Network) { n.Identity.Plan = fpB },
			`cut the model differently: its plan fingerprint is (bbbbbbbbbbbb…, this peer's aaaaaaaaaaaa…|aaaaaaaaaaaa…, this peer's bbbbbbbbbbbb…)`},
		{"setting", func(n *Network) { n.Identity.Settings = []transport.Setting{{Name: "lr", Value: "0.2"}} },
			`runs with another lr: (0\.1 there, 0\.2 here|0\.2 there, 0\.1 here)`},
		{"stages", func(n *Network) { n.Addrs = append(n.Addrs, "127.0.0.1:1") },
			`runs a pipeline of 3 stages, stage \d one of 2`},
		{"links", func(n *Network) { n.Links = nil },
			`links stages \[\], stage \d links \[0-1\]`},
		{"order", func(n *Network) { n.Addrs[0], n.Addrs[1] = n.Addrs[1], n.Addrs[0] },
			`expected stage (0 at \S+, got stage 1|1 at \S+, got stage 0): are the stage addresses in stage order\?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a stage the driver gave up on waits for its connect timeout
			ls, addrs := listeners(t, 2)
			lr := []transport.Setting{{Name: "lr", Value: "0.1"}}
			stage := Network{Addrs: addrs, Links: chain(2), Identity: transport.Identity{Plan: fpA, Settings: lr}}
			driver := Network{Addrs: append([]string{}, addrs...), Links: chain(2), Identity: transport.Identity{Plan: fpA, Settings: lr}}
			tc.mutate(&driver)
			errs := make([]error, 3)
			var wg sync.WaitGroup
			for i := -1; i < 2; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					n, o := driver, quick(5*time.Second)
					if i >= 0 {
						n, o = stage, append(o, WithListener(ls[i]), WithConnectTimeout(3*time.Second))
					}
					e, err := Open(context.Background(), transport.Peer(i), n, o...)
					errs[i+1] = err
					if err == nil {
						_ = e.Close()
					}
				}()
			}
			wg.Wait()
			require.Error(t, errs[0])
			require.Regexp(t, tc.want, errs[0].Error())
			require.True(t, strings.HasPrefix(errs[0].Error(), "driver: "), errs[0].Error())
			if tc.name != "order" { // the stage that refused says so too
				refused := 0
				for i, err := range errs[1:] {
					if err != nil && strings.Contains(err.Error(), "refused a peer: driver at 127.0.0.1:") {
						refused++
						require.Regexp(t, tc.want, err.Error())
						require.True(t, strings.HasPrefix(err.Error(), transport.Peer(i).String()+": "), err.Error())
					}
				}
				require.NotZero(t, refused, "no stage said it refused the driver: %v", errs[1:])
			}
		})
	}
}

// TestSecondPeerWithTheSameIdentityIsRefused: a second driver is refused
// and the pipeline that is up carries on.
func TestSecondPeerWithTheSameIdentityIsRefused(t *testing.T) {
	ls, addrs := listeners(t, 1)
	n := Network{Addrs: addrs, Identity: transport.Identity{Plan: "fp"}}
	p := open(t, n, ls, quick(5*time.Second)...)
	_, err := Open(context.Background(), transport.Driver, n, quick(5*time.Second)...)
	require.ErrorContains(t, err, "refused the handshake: a second driver at 127.0.0.1:")
	require.ErrorContains(t, err, "driver is already connected from 127.0.0.1:")
	ctx := context.Background()
	require.NoError(t, p.driver.Send(ctx, transport.Message{Kind: transport.Control, To: 0, Body: "still here"}))
	m, err := p.stages[0].Recv(ctx, transport.Driver, transport.Control)
	require.NoError(t, err)
	require.Equal(t, "still here", m.Body)
}

// TestOpenNamesTheMissingPeer: a stage whose driver never comes gives up
// after the connect timeout, naming whom it waited for; a driver whose
// stage is not there, or takes the connection and never answers, names the
// stage and its address, and says what it last heard; a driver missing
// two stages names both. Each error is ErrConnectTimeout.
func TestOpenNamesTheMissingPeer(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ls, addrs := listeners(t, 1)
	start := time.Now()
	_, err := Open(context.Background(), 0, Network{Addrs: addrs}, WithInsecure(), WithListener(ls[0]), WithConnectTimeout(timeout))
	require.ErrorIs(t, err, transport.ErrConnectTimeout)
	require.EqualError(t, err, "stage 0: not connected within 300ms (the connect timeout): driver did not connect to stage 0 (are they running, and given this stage's address?)")
	require.Less(t, time.Since(start), 5*time.Second)

	_, silent := listeners(t, 1) // listening, but nobody answers: the connection is never set up
	ls2, free := listeners(t, 1)
	require.NoError(t, ls2[0].Close()) // nobody listens: connection refused
	for _, c := range []struct{ addr, says string }{
		{silent[0], "did not complete the connection (is it stalled, or its host unreachable?)"},
		{free[0], "did not answer (is it running, and is the address right?): connection error: "},
	} {
		_, err = Open(context.Background(), transport.Driver, Network{Addrs: []string{c.addr}}, WithInsecure(), WithConnectTimeout(timeout))
		require.ErrorIs(t, err, transport.ErrConnectTimeout)
		require.ErrorContains(t, err, "driver: not connected within 300ms (the connect timeout): stage 0 at "+c.addr+" "+c.says)
	}
	_, err = Open(context.Background(), transport.Driver, Network{Addrs: []string{free[0], silent[0]}}, WithInsecure(), WithConnectTimeout(timeout))
	require.ErrorContains(t, err, "stage 0 at "+free[0]+" did not answer")
	require.ErrorContains(t, err, "stage 1 at "+silent[0]+" did not complete the connection")
}

// TestStageStalledInTheHandshake: a stage that takes the driver's stream
// and reads its hello but never answers (a process stopped there) makes the
// driver's Open fail at the connect timeout, saying so; the stage, once it
// goes on, finds its own connect timeout passed.
func TestStageStalledInTheHandshake(t *testing.T) {
	release := make(chan struct{})
	faultpoint.Set(func(p faultpoint.Point) {
		if p.Name == faultpoint.HelloReceived && p.Stage == int(transport.Driver) {
			<-release
		}
	})
	defer faultpoint.Set(nil)
	ls, addrs := listeners(t, 1)
	n := Network{Addrs: addrs}
	// The stage waits longer than the driver: a stage whose own connect
	// timeout passed first would close the connection, and the driver would
	// then find no connection at all rather than a stalled handshake. It
	// must also be serving before the driver's clock starts: on a loaded
	// machine its server could come up after the driver's connect timeout,
	// and the driver would rightly say it never completed the connection
	// (TestOpenNamesTheMissingPeer's silent stage).
	const stageTimeout = 3 * time.Second
	stage := openStage(t, ls[0], n, WithInsecure(), WithConnectTimeout(stageTimeout))
	stageStart := time.Now()
	waitServing(t, addrs[0])
	start := time.Now()
	_, err := Open(context.Background(), transport.Driver, n, WithInsecure(), WithConnectTimeout(time.Second))
	require.ErrorIs(t, err, transport.ErrConnectTimeout)
	require.EqualError(t, err, "driver: not connected within 1s (the connect timeout): stage 0 at "+addrs[0]+" took the stream but did not answer the handshake (is it stalled, or overloaded?)")
	require.Less(t, time.Since(start), 3*time.Second)
	time.Sleep(time.Until(stageStart.Add(stageTimeout + 200*time.Millisecond))) // the stage's own timeout passes too
	close(release)
	select {
	case err := <-stage:
		require.ErrorIs(t, err, transport.ErrConnectTimeout)
		require.ErrorContains(t, err, "stage 0: not connected within 3s")
	case <-time.After(10 * time.Second):
		t.Fatal("the stage's Open did not return")
	}
}

// TestOpenCanceled: an Open whose context ends is not a timeout.
func TestOpenCanceled(t *testing.T) {
	ls, addrs := listeners(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := Open(ctx, 0, Network{Addrs: addrs}, WithInsecure(), WithListener(ls[0]), WithConnectTimeout(time.Minute))
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, transport.ErrConnectTimeout)
	require.EqualError(t, err, "stage 0: connecting: context canceled")
}

func TestOptionsAreChecked(t *testing.T) {
	ctx := context.Background()
	n := Network{Addrs: []string{"127.0.0.1:7000"}}
	for _, tc := range []struct {
		self transport.Peer
		n    Network
		opts []Option
		want string
	}{
		{transport.Driver, n, nil, "driver: no credentials: give WithTLS (required when an address is not loopback), or WithInsecure when every address is loopback"},
		{transport.Driver, n, []Option{WithInsecure(), WithRecvTimeout(0)}, "receive timeout 0s: it must be positive"},
		{transport.Driver, Network{}, []Option{WithInsecure()}, "the network has no stages"},
		{3, n, []Option{WithInsecure()}, "stage 3 is not a peer of a pipeline of 1 stages"},
		{transport.Driver, Network{Addrs: []string{"a:1", "b:2"}, Links: []transport.Link{{A: 0, B: 0}}}, []Option{WithInsecure()}, "link 0-0: a link joins two different stages of 0..1"},
		{transport.Driver, Network{Addrs: []string{"a:1", "b:2"}, Links: []transport.Link{{A: 0, B: 1}, {A: 1, B: 0}}}, []Option{WithInsecure()}, "link 1-0 is listed twice"},
		{transport.Driver, Network{Addrs: []string{"nohost"}}, []Option{WithInsecure()}, "address of stage 0: address nohost: missing port in address"},
	} {
		_, err := Open(ctx, tc.self, tc.n, tc.opts...)
		require.ErrorContains(t, err, tc.want)
	}
}

// waitServing waits until a gRPC server answers at addr (its HTTP/2
// connection is set up), and closes the connection it made to find out.
func waitServing(t *testing.T, addr string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn.Connect()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		require.True(t, conn.WaitForStateChange(ctx, s), "no server at %s within 30 s", addr)
	}
}
