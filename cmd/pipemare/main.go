// Command pipemare trains the zoo's models with asynchronous pipeline
// parallelism and shows what happened.
//
//	pipemare train     train a model (default: the ResNet on the embedded
//	                   Fashion-MNIST, fine-grained PipeMare with T1 and T2)
//	pipemare compare   every schedule on the same model, data and seed, as a table
//	pipemare sweep     methods × delays × seeds on a model: a table and a plot
//	pipemare plan      the stage table (and Graphviz) of a model
//	pipemare schedule  the clock × stage grid of a schedule
//	pipemare stage     serve one stage of a pipeline whose driver is train
//	pipemare eval      the test accuracy of a trained model (model.safetensors)
//	pipemare bench     a placement's speed-up over the same training on one CPU; with -target, time to accuracy
//	pipemare certs     a CA and certificates for stages on several hosts
//
// Stages in other processes, checkpoints and the trained model:
//
//	pipemare train -model mlp -procs 3              3 stage processes over loopback, mTLS
//	pipemare certs -out certs -hosts h0,h1,h2       then on host i: pipemare stage -stage i …
//	pipemare train -stage-addrs h0:7000,h1:7000,h2:7000 -certs certs …
//	pipemare train -checkpoint-every 50 -out run …  after a crash, the same flags with -resume run
//	pipemare eval -model mlp -weights run/model.safetensors
//
// Under torchrun or a Kubernetes JobSet every process runs the same train
// command line: the process of stage 0 drives, the others serve a stage.
//
// Each command's -h lists its flags (on stdout, exit code 0). A wrong command
// line prints one line naming the flag and the usage (exit code 2); any
// other failure prints one line (exit code 1).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/pipemare/pipemare/graphsplit"
)

const usage = `usage: pipemare <command> [flags]

commands:
  train     train a zoo model with a pipeline schedule
  compare   run every schedule on the same model and data, print one table
  sweep     methods × delay settings × seeds on a model: mean accuracy ± std, a plot
  plan      print the stage table (and write Graphviz) for a model
  schedule  print the clock × stage grid of a schedule
  stage     serve one stage of a pipeline driven by train -stage-addrs
  eval      measure the test accuracy of a trained model (and its predictions)
  certs     write a CA and per-stage certificates for mutual TLS
  bench     a training placed as the flags say against the same on one CPU: the speed-up
            (-target ACC: time to that accuracy in each placement, over seeds)

examples:
  pipemare train -model mlp -procs 3                   stages in 3 processes of this host
  pipemare train -model mlp -checkpoint-every 50 -out run
  pipemare train -model mlp -checkpoint-every 50 -resume run    continue it after a crash
  pipemare eval -model mlp -weights run/model.safetensors

pipemare <command> -h lists the command's flags.
`

func main() { os.Exit(mainCode()) }

// mainCode is the program: the command line of os.Args, stopped cleanly
// by SIGINT or SIGTERM (a training still writes the report of what ran,
// and stops its stage processes). It returns the exit code.
func mainCode() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, os.Args[1:], os.Stdout, os.Stderr)
}

// run is the command line without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	graphsplit.UseFastBLAS() // every subcommand cuts, profiles or trains with it
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmds := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"train": trainCmd, "compare": compareCmd, "sweep": sweepCmd, "plan": planCmd, "schedule": scheduleCmd,
		"certs": certsCmd, "stage": stageCmd, "eval": evalCmd, "bench": benchCmd,
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "pipemare: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if err := cmd(ctx, args[1:], stdout, stderr); err != nil {
		switch err {
		case errHelp:
			return 0
		case errUsage:
			return 2
		}
		fmt.Fprintf(stderr, "pipemare %s: %v\n", args[0], inFlags(err))
		return 1
	}
	return 0
}
