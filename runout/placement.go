package runout

import (
	"fmt"
	"path/filepath"

	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/runspec"
)

// Placement is what report.json says of where a run's stages run, placed
// as w and pl say (launch.Setup.Decide): in this process, in stage
// processes of this host, or remote (at known addresses, or where a
// launcher put them), over shared memory when n's Transport carries the
// placement so (launch.Transport.For: by default when every process is on
// loopback, as stage processes of this host are), else over gRPC with plaintext
// links with n's Credentials.Insecure, else mutual TLS; driverCPUs are this process's CPUs ("": not pinned). The addresses,
// processes and CPUs of stage processes started here are the caller's to
// fill in once they start.
func Placement(w launch.Where, pl launch.Place, n launch.Net, driverCPUs string) *rundir.Placement {
	p := &rundir.Placement{Where: "in-process", DriverCPUs: driverCPUs}
	switch w {
	case launch.LocalProcs:
		p.Where = "processes"
	case launch.Remote, launch.LaunchedFirst:
		p.Where, p.Launcher, p.Addresses = "remote", pl.Launcher, pl.Addrs
	}
	switch {
	case w == launch.InProcess:
	case n.Transport.For(w, pl.Addrs) == launch.TransportShm:
		p.Transport = "shared memory"
	default:
		p.Transport = "grpc+mtls"
		if n.Credentials.Insecure {
			p.Transport = "grpc (plaintext)"
		}
	}
	return p
}

// RunStart reads pipemare train's -resume (resume; "": a new run) against
// its -out (out; outGiven: the command line gave it): the run's output
// directory, the checkpoint it continues from (rundir.ResumeTarget) and
// how it starts (rundir.Fresh; Resume; ResumeIfAny for rundir.ResumeAuto,
// which resumes out's run). A -resume DIR whose run is not the -out given
// is an error naming both: a resumed run writes to the directory it
// resumes.
func RunStart(resume, out string, outGiven bool) (dir, from string, how rundir.Start, err error) {
	if resume == "" {
		return out, "", rundir.Fresh, nil
	}
	dir, from = rundir.ResumeTarget(resume, out)
	switch {
	case resume == rundir.ResumeAuto:
		return dir, from, rundir.ResumeIfAny, nil
	case outGiven && filepath.Clean(out) != dir:
		return out, "", 0, &runspec.Error{Setting: "resume", Value: resume, Reason: fmt.Sprintf("a resumed run writes to the directory it resumes (%s), not {out} %s", dir, out)}
	}
	return dir, from, rundir.Resume, nil
}
