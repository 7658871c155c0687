package launch_test

import (
	"fmt"
	"time"

	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/runspec"
)

// A stage process under torchrun (three processes on one node): where it
// stands, and the connector a stage hands train.ServeStage, which opens
// its endpoint once the model is cut (the driver's, Stage -1, goes in
// train.Config.Connect).
func ExamplePlace() {
	env := map[string]string{"RANK": "1", "WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok } // os.LookupEnv in a real process
	c, found, err := launch.FromEnv(lookup)
	if err != nil || !found {
		fmt.Println(found, err)
		return
	}
	pl := launch.Place{Addrs: c.Addrs, Stage: c.Rank, Listen: c.Listen, Launcher: c.Launcher, Stride: c.Stride}
	connect := pl.Connector(launch.Credentials{Dir: "certs"}, time.Minute)
	_ = connect // train.ServeStage(ctx, build, data, cfg, pl.Stage, connect)
	fmt.Printf("%v of %d, placed by %s, listens on %s\n", pl.Peer(), len(pl.Addrs), pl.Launcher, pl.Listen)
	// Output: stage 1 of 3, placed by torchrun, listens on 127.0.0.1:29502
}

// The process of rank 1 of two under torchrun, on one node, hosting
// zb-v's stages of a plan of 4 (in a V: rank 0 hosts 0 and 3, rank 1 1
// and 2): once the model is cut, Launched gives a place per stage, each a
// port of its own.
func ExampleLaunched() {
	env := map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
	c, _, err := launch.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		fmt.Println(err)
		return
	}
	pl := launch.Place{Addrs: c.Addrs, Stride: c.Stride, Stage: c.Rank, Listen: c.Listen, Launcher: c.Launcher,
		Spec: runspec.Spec{Model: "cnn", Schedule: "zb-v"}}
	costs := []float64{1, 1, 1, 1} // plan.Costs() of the cut model
	pls, err := launch.Launched(pl, nil, costs)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range pls {
		fmt.Printf("%v listens on %s\n", p.Peer(), p.Listen)
	}
	// Output:
	// stage 1 listens on 127.0.0.1:29502
	// stage 2 listens on 127.0.0.1:29504
}
