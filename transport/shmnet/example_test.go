//go:build linux

package shmnet_test

import (
	"context"
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/shmnet"
)

// A driver and a one-stage pipeline over shared memory; in a real run each
// Open runs in its own process of the same host, every one given the same
// Network (launch.Place.OpenShm makes it from the plan).
func ExampleOpen() {
	ctx := context.Background()
	network := shmnet.Network{Name: shmnet.SocketName([]string{"127.0.0.1:7000"}) + "-example", Stages: 1,
		Identity: transport.Identity{Plan: "plan-sha256"}}

	stage := make(chan *shmnet.Endpoint)
	go func() { // the stage's process
		e, err := shmnet.Open(ctx, 0, network)
		if err != nil {
			fmt.Println(err)
		}
		stage <- e
	}()
	driver, err := shmnet.Open(ctx, transport.Driver, network)
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
