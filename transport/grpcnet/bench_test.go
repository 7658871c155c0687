package grpcnet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/internal/recycle"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/transport"
)

// benchSizes are the tensor sizes of the benchmarks, in bytes (0: a message
// with no tensor, the per-message overhead).
var benchSizes = []int{0, 4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

func benchValues(size int) []gorgonia.Value {
	if size == 0 {
		return nil
	}
	return []gorgonia.Value{tensor.New(tensor.WithShape(size/4), tensor.WithBacking(f32s(size/4)))}
}

// BenchmarkStream: stage 0 streams activations to stage 1 over loopback,
// as a pipeline does; ns/op is the cost of one message at that rate, MB/s
// the throughput and cpu-ms/MiB the CPU time both ends spent per MiB
// (getrusage). The links are plaintext, as loopback allows; the chunk
// sizes compare the default with 4 MiB.
func BenchmarkStream(b *testing.B) {
	for _, chunk := range []int{1 << 20, 4 << 20} {
		for _, size := range benchSizes {
			if chunk != chunkSize && size < 1<<20 {
				continue // chunks matter only for large tensors
			}
			b.Run(fmt.Sprintf("chunk=%s/size=%s", sizeName(chunk), sizeName(size)), func(b *testing.B) {
				streamBench(b, size, append(quick(time.Minute), func(s *settings) { s.chunk = chunk })...)
			})
		}
	}
}

// BenchmarkStreamTLS: BenchmarkStream over mutual TLS 1.3, as between
// hosts.
func BenchmarkStreamTLS(b *testing.B) {
	tlsFor := creds(b, "127.0.0.1")
	for _, size := range benchSizes {
		b.Run("size="+sizeName(size), func(b *testing.B) {
			streamBench(b, size, tlsFor(0), WithRecvTimeout(time.Minute), WithConnectTimeout(10*time.Second))
		})
	}
}

// streamBench streams b.N messages of a size-byte tensor from stage 0 to
// stage 1, both opened with opts.
func streamBench(b *testing.B, size int, opts ...Option) {
	ls, addrs := listeners(b, 2)
	p := open(b, Network{Addrs: addrs, Links: chain(2)}, ls, opts...)
	vals := benchValues(size)
	ctx := context.Background()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := testutil.StartCPU()
	done := make(chan error, 1)
	go func() {
		for i := 0; i < b.N; i++ {
			m, err := p.stages[1].Recv(ctx, 0, transport.Activation)
			if err != nil {
				done <- err
				return
			}
			for _, v := range m.Values {
				recycle.Put(v) // the receiver returns it, as a stage does
			}
		}
		done <- nil
	}()
	for i := 0; i < b.N; i++ {
		if err := p.stages[0].Send(ctx, transport.Message{Kind: transport.Activation, To: 1, Micro: i, Values: vals}); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	cpu.Report(b, int64(size)*int64(b.N))
}

// BenchmarkRoundTrip: the driver sends a tensor to a stage, which sends it
// back; ns/op is the latency of the round trip, MB/s counts both ways.
func BenchmarkRoundTrip(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("size="+sizeName(size), func(b *testing.B) {
			ls, addrs := listeners(b, 1)
			p := open(b, Network{Addrs: addrs}, ls, quick(time.Minute)...)
			vals := benchValues(size)
			ctx := context.Background()
			stop := make(chan struct{})
			echoed := make(chan struct{})
			go func() {
				defer close(echoed)
				for {
					m, err := p.stages[0].Recv(ctx, transport.Driver, transport.Control)
					if err != nil {
						return
					}
					if err := p.stages[0].Send(ctx, transport.Message{Kind: transport.Reply, To: transport.Driver, Values: m.Values}); err != nil {
						return
					}
					select {
					case <-stop:
						return
					default:
					}
				}
			}()
			b.SetBytes(2 * int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := p.driver.Send(ctx, transport.Message{Kind: transport.Control, To: 0, Values: vals}); err != nil {
					b.Fatal(err)
				}
				if _, err := p.driver.Recv(ctx, 0, transport.Reply); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			close(stop)
			p.close()
			<-echoed
		})
	}
}
