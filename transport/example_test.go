package transport_test

import (
	"context"
	"fmt"

	"github.com/pipemare/pipemare/transport"
)

// A driver orders a stage to work; the stage sends an activation on and
// answers the driver.
func ExampleLocal() {
	ctx := context.Background()
	net := transport.NewLocal(2)
	defer net.Close()
	driver, s0, s1 := net.Endpoint(transport.Driver), net.Endpoint(0), net.Endpoint(1)

	_ = driver.Send(ctx, transport.Message{Kind: transport.Control, To: 0, Body: "run F0"})
	order, _ := s0.Recv(ctx, transport.Driver, transport.Control)
	_ = s0.Send(ctx, transport.Message{Kind: transport.Activation, To: 1, Micro: 0})
	_ = s0.Send(ctx, transport.Message{Kind: transport.Reply, To: transport.Driver, Body: "done"})

	act, _ := s1.Recv(ctx, 0, transport.Activation)
	reply, _ := driver.Recv(ctx, transport.AnyPeer, transport.Reply)
	fmt.Println(order.Body, "|", act, "|", reply.From, reply.Body)
	// Output: run F0 | activation from stage 0 to stage 1 (microbatch 0) | stage 0 done
}
