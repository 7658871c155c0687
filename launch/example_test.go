package launch_test

import (
	"fmt"
	"time"

	"github.com/pipemare/pipemare/launch"
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
	pl := launch.Place{Addrs: c.Addrs, Stage: c.Stage, Listen: c.Listen, Launcher: c.Launcher}
	connect := pl.Connector(launch.Credentials{Dir: "certs"}, time.Minute)
	_ = connect // train.ServeStage(ctx, build, data, cfg, pl.Stage, connect)
	fmt.Printf("%v of %d, placed by %s, listens on %s\n", pl.Peer(), len(pl.Addrs), pl.Launcher, pl.Listen)
	// Output: stage 1 of 3, placed by torchrun, listens on 127.0.0.1:29502
}
