package grpcnet

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/internal/recycle"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/transport"
	pb "github.com/pipemare/pipemare/transport/grpcnet/internal/framepb"
)

// TestOwnTensorsWaitForGRPC: the frame codec hands a tensor's bytes to
// gRPC without copying them, so a tensor sent Own must not go back to the
// pools before gRPC is done writing it. The sender sends pooled tensors
// Own and at once takes tensors of the same shape from the pools and
// overwrites them: had a sent one come back early, the receiver would see
// the overwrite (and -race the two goroutines touching it).
func TestOwnTensorsWaitForGRPC(t *testing.T) {
	ls, addrs := listeners(t, 2)
	p := open(t, Network{Addrs: addrs, Links: chain(2)}, ls, quick(10*time.Second)...)
	ctx := context.Background()
	const elems = 3 << 18 // 3 MiB: three chunks each
	n := 30
	if testutil.RaceEnabled {
		n = 8 // the detector sees the overwrite in a few
	}
	got := make(chan error, 1)
	go func() {
		for i := range n {
			m, err := p.stages[1].Recv(ctx, 0, transport.Activation)
			if err != nil {
				got <- err
				return
			}
			if !bytes.Equal(view(m.Values[0].(*tensor.Dense).Float32s()), view(fill(make([]float32, elems), float32(i)))) {
				got <- errors.Errorf("message %d arrived overwritten", i)
				return
			}
			recycle.Put(m.Values[0])
		}
		got <- nil
	}()
	for i := range n {
		v := recycle.Get(tensor.Float32, tensor.Shape{elems})
		fill(v.Float32s(), float32(i))
		require.NoError(t, p.stages[0].Send(ctx, transport.Message{Kind: transport.Activation, To: 1, Micro: i, Values: []gorgonia.Value{v}, Own: true}))
		for range 2 { // what the pools hand out now is not what gRPC still writes
			w := recycle.Get(tensor.Float32, tensor.Shape{elems})
			fill(w.Float32s(), -1)
			defer recycle.Put(w)
		}
	}
	require.NoError(t, <-got)
}

// fill sets every element of s to x, in a few copies (cheap under -race).
func fill(s []float32, x float32) []float32 {
	s[0] = x
	for k := 1; k < len(s); k *= 2 {
		copy(s[k:], s[:k])
	}
	return s
}

// FuzzFrameCodec: whatever bytes arrive as a frame, the frame codec
// returns an error or a frame, never panics; a chunk's bytes come out as
// they went in; a protobuf frame decodes to what was encoded. CI runs the
// seeds.
func FuzzFrameCodec(f *testing.F) {
	for _, fr := range []*pb.Frame{
		{Frame: &pb.Frame_Hello{Hello: &pb.Hello{Wire: wireVersion, Peer: 1, Stages: 2, Fingerprint: "fp"}}},
		{Frame: &pb.Frame_Header{Header: &pb.Header{Kind: 1, From: 0, To: 1, Tensors: []*pb.Tensor{{Form: pb.Form_DENSE, Dtype: pb.Dtype_FLOAT32, Shape: []int64{2}, Data: make([]byte, 8)}}}}},
		{Frame: &pb.Frame_Bye{Bye: &pb.Bye{}}},
	} {
		b, err := frameCodec{}.Marshal(fr)
		require.NoError(f, err)
		f.Add(b.Materialize())
	}
	f.Add([]byte{tagChunk, 1, 2, 3})
	f.Add([]byte{})
	f.Add([]byte{7, 0})
	f.Add([]byte{tagProto, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr pb.Frame
		errTyped := frameCodec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &fr)
		var in inFrame
		err := frameCodec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &in)
		switch {
		case err != nil:
		case in.chunk != nil:
			rest := make([]byte, in.chunk.Remaining())
			_, rerr := in.chunk.Read(rest)
			in.chunk.Close()
			if len(rest) > 0 {
				require.NoError(t, rerr)
			}
			require.Equal(t, b[1:], rest, "a chunk's bytes come out as they went in")
			require.Error(t, errTyped, "a chunk is no protobuf frame")
		default:
			require.NoError(t, errTyped)
			require.True(t, proto.Equal(&fr, &in.frame))
			again, err := frameCodec{}.Marshal(&in.frame)
			require.NoError(t, err)
			var back pb.Frame
			require.NoError(t, frameCodec{}.Unmarshal(again, &back))
			require.True(t, proto.Equal(&fr, &back), "a frame decodes to what encodes back to it")
		}
	})
}
