//go:build linux

package shmnet

import (
	"bytes"
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

// benchSizes are the tensor sizes of the benchmarks, in bytes: those of
// grpcnet's BenchmarkStream, to compare.
var benchSizes = []int{4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// BenchmarkStream: stage 0 streams activations to stage 1, as a pipeline
// does, both in this process (the rings are shared memory all the same);
// ns/op is the cost of one message at that rate, MB/s the throughput and
// cpu-ms/MiB the CPU time both ends spent per MiB (getrusage). Its
// sender runs ahead of the receiver: it fills the slab, and sends the
// rest through the ring.
func BenchmarkStream(b *testing.B) { benchStream(b, false) }

// BenchmarkStreamPaced: as BenchmarkStream, but as a pipeline paces its
// sends: at most two messages are out (sent and not yet returned by the
// receiver), and the receiver reads every byte it gets once, as a stage
// computes on its input. A large tensor then crosses in the slab (one
// copy, read in place).
func BenchmarkStreamPaced(b *testing.B) { benchStream(b, true) }

func benchStream(b *testing.B, paced bool) {
	for _, size := range benchSizes {
		b.Run("size="+sizeName(size), func(b *testing.B) {
			p := open(b, testNetwork(2), WithRecvTimeout(time.Minute))
			vals := []gorgonia.Value{tensor.New(tensor.WithShape(size/4), tensor.WithBacking(f32s(size/4)))}
			ctx := context.Background()
			out := make(chan struct{}, 2) // paced: a token per message out
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
						if paced {
							_ = bytes.Count(view(v.(*tensor.Dense).Float32s()), []byte{0xff}) // reads each byte once
						}
						recycle.Put(v) // the receiver returns it, as a stage does
					}
					if paced {
						<-out
					}
				}
				done <- nil
			}()
			for i := 0; i < b.N; i++ {
				if paced {
					out <- struct{}{}
				}
				if err := p.stages[0].Send(ctx, transport.Message{Kind: transport.Activation, To: 1, Micro: i, Values: vals}); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			cpu.Report(b, int64(size)*int64(b.N))
		})
	}
}
