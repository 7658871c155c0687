package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/transport/pki"
)

// certsCmd writes a CA and per-peer certificates for trying stages on
// several hosts with mutual TLS.
func certsCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare certs", flag.ContinueOnError)
	out := fs.String("out", "certs", "directory to write the CA and the certificates to (must not hold them already)")
	hosts := fs.String("hosts", "", "the stages' hosts in stage order, comma-separated: names or IP addresses, one per stage (e.g. pipemare-stage-0-0.pipemare,pipemare-stage-0-1.pipemare), or with -stages one host for every stage or one per process hosting several")
	stages := fs.Int("stages", 0, "the number of stages, when -hosts has fewer: one host holds them all, or each stage's certificate is valid for every host of -hosts, where the run's placement may put it (default: one stage per host)")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if *hosts == "" {
		return usageError(fs, "-hosts is required: one host per stage, or one host and -stages")
	}
	list := strings.Split(*hosts, ",")
	for i := range list {
		list[i] = strings.TrimSpace(list[i])
	}
	n := *stages
	if n == 0 {
		n = len(list)
	}
	each, err := launch.StageHosts(list, n)
	if err != nil {
		return usageError(fs, "%v", err)
	}
	if err := pki.WriteHosts(*out, each); err != nil {
		return err
	}
	what := fmt.Sprintf("%d stages", n)
	switch {
	case n == 1:
		what = "1 stage (one host: give -stages N for N stages on it)"
	case len(list) > 1 && len(list) < n:
		what += fmt.Sprintf(", each valid for all %d hosts", len(list))
	}
	fmt.Fprintf(stdout, "wrote a CA and certificates for the driver and %s to %s\n", what, *out)
	fmt.Fprintf(stdout, "give every peer %s; give each its own %s and %s; keep %s away from the peers\n",
		filepath.Join(*out, "ca.pem"), filepath.Join(*out, "<peer>.pem"), filepath.Join(*out, "<peer>-key.pem"), filepath.Join(*out, "ca-key.pem"))
	return nil
}
