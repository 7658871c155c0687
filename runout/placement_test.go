package runout

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/rundir"
)

func TestPlacement(t *testing.T) {
	pl := launch.Place{Addrs: []string{"h0:1", "h1:1"}, Stage: 0, Launcher: "jobset"}
	plain := launch.Net{Credentials: launch.Credentials{Insecure: true}}
	grpc := plain
	grpc.Transport = launch.TransportGRPC
	require.Equal(t, &rundir.Placement{Where: "in-process", DriverCPUs: "0-3"}, Placement(launch.InProcess, launch.Place{Stage: -1}, launch.Net{}, "0-3"))
	shm := plain
	shm.Transport = launch.TransportShm
	byDefault := "shared memory" // launch.Transport.For
	if runtime.GOOS != "linux" {
		byDefault = "grpc (plaintext)"
	}
	require.Equal(t, &rundir.Placement{Where: "processes", Transport: byDefault}, Placement(launch.LocalProcs, launch.Place{Stage: -1}, plain, ""), "stage processes of this host share memory by default")
	require.Equal(t, &rundir.Placement{Where: "processes", Transport: "grpc (plaintext)"}, Placement(launch.LocalProcs, launch.Place{Stage: -1}, grpc, ""))
	require.Equal(t, &rundir.Placement{Where: "processes", Transport: "shared memory"}, Placement(launch.LocalProcs, launch.Place{Stage: -1}, shm, ""), "or share memory when asked")
	require.Equal(t, &rundir.Placement{Where: "remote", Launcher: "jobset", Addresses: pl.Addrs, Transport: "grpc+mtls"}, Placement(launch.LaunchedFirst, pl, launch.Net{}, ""))
	require.Equal(t, &rundir.Placement{Where: "remote", Addresses: pl.Addrs, Transport: "grpc+mtls"}, Placement(launch.Remote, launch.Place{Addrs: pl.Addrs, Stage: -1}, launch.Net{}, ""))
	loop := []string{"127.0.0.1:1", "localhost:1"}
	require.Equal(t, &rundir.Placement{Where: "remote", Addresses: loop, Transport: byDefault}, Placement(launch.Remote, launch.Place{Addrs: loop, Stage: -1}, plain, ""), "stages at loopback addresses share memory by default")
	require.Equal(t, &rundir.Placement{Where: "remote", Addresses: loop, Transport: "grpc (plaintext)"}, Placement(launch.Remote, launch.Place{Addrs: loop, Stage: -1}, grpc, ""))
}

// TestRunStart: a new run, a resume of a run's directory or of one of its
// checkpoints, auto; and a -out that is not the resumed run's.
func TestRunStart(t *testing.T) {
	for _, c := range []struct {
		resume, out string
		outGiven    bool
		dir, from   string
		how         rundir.Start
	}{
		{"", "out", false, "out", "", rundir.Fresh},
		{"run", "out", false, "run", filepath.Join("run", rundir.CheckpointsDir), rundir.Resume},
		{"run/", "run", true, "run", filepath.Join("run", rundir.CheckpointsDir), rundir.Resume},
		{"run/checkpoints/step-5", "out", false, "run", "run/checkpoints/step-5", rundir.Resume},
		{rundir.ResumeAuto, "out", true, "out", filepath.Join("out", rundir.CheckpointsDir), rundir.ResumeIfAny},
	} {
		dir, from, how, err := RunStart(c.resume, c.out, c.outGiven)
		require.NoError(t, err, "%+v", c)
		require.Equal(t, []any{c.dir, c.from, c.how}, []any{dir, from, how}, "%+v", c)
	}
	_, _, _, err := RunStart("run", "out", true)
	require.EqualError(t, err, "resume run: a resumed run writes to the directory it resumes (run), not out out")
}
