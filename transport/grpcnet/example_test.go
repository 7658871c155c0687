package grpcnet_test

import (
	"context"
	"fmt"
	"net"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/grpcnet"
)

// A driver and a one-stage pipeline over loopback; in a real deployment
// each Open runs in its own process, with WithTLS instead of WithInsecure.
func ExampleOpen() {
	ctx := context.Background()
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	network := grpcnet.Network{Addrs: []string{lis.Addr().String()}, Identity: transport.Identity{Plan: "plan-sha256"}}

	stage := make(chan *grpcnet.Endpoint)
	go func() { // the stage's process
		e, err := grpcnet.Open(ctx, 0, network, grpcnet.WithInsecure(), grpcnet.WithListener(lis))
		if err != nil {
			fmt.Println(err)
		}
		stage <- e
	}()
	driver, err := grpcnet.Open(ctx, transport.Driver, network, grpcnet.WithInsecure())
	if err != nil {
		fmt.Println(err)
		return
	}
	s0 := <-stage

	x := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, 4}))
	_ = driver.Send(ctx, transport.Message{Kind: transport.Control, To: 0, Body: "forward", Values: []gorgonia.Value{x}})
	m, _ := s0.Recv(ctx, transport.Driver, transport.Control)
	fmt.Println(m.From, m.Body, m.Values[0].Shape(), m.Values[0].Data())

	_ = s0.Close()
	_ = driver.Close()
	// Output: driver forward (2, 2) [1 2 3 4]
}
