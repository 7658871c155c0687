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
	hosts := fs.String("hosts", "", "the stages' hosts in stage order, comma-separated: names or IP addresses, one per stage (e.g. pipemare-stage-0-0.pipemare,pipemare-stage-0-1.pipemare), or one host for every stage with -stages")
	stages := fs.Int("stages", 0, "the number of stages, when one host in -hosts holds them all (default: one stage per host)")
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
	if *stages != 0 {
		var err error
		if list, err = launch.StageHosts(list, *stages); err != nil {
			return usageError(fs, "%v", err)
		}
	}
	if err := pki.Write(*out, list); err != nil {
		return err
	}
	what := fmt.Sprintf("%d stages", len(list))
	if len(list) == 1 {
		what = "1 stage (one host: give -stages N for N stages on it)"
	}
	fmt.Fprintf(stdout, "wrote a CA and certificates for the driver and %s to %s\n", what, *out)
	fmt.Fprintf(stdout, "give every peer %s; give each its own %s and %s; keep %s away from the peers\n",
		filepath.Join(*out, "ca.pem"), filepath.Join(*out, "<peer>.pem"), filepath.Join(*out, "<peer>-key.pem"), filepath.Join(*out, "ca-key.pem"))
	return nil
}
