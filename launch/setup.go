package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/transport"
)

// Where is where the stages of a training process's pipeline run.
type Where int

const (
	InProcess     Where = iota // goroutines of the training process
	LocalProcs                 // stage processes it starts on its host (StartLocal)
	Remote                     // stages started elsewhere, at known addresses
	LaunchedFirst              // under a launcher, stage 0's process: the driver, and stage 0 beside it (ServeBeside)
	LaunchedStage              // under a launcher, another stage's process: it serves its stage
)

// Setup is where the process that trains (pipemare train) is told to run
// its pipeline's stages: in Procs stage processes of its host, at Net's
// addresses, or as a launcher placed it; and how it reaches them. Its
// errors are *runspec.Error naming the settings (procs, pin, stage_addrs,
// certs, insecure, connect_timeout).
type Setup struct {
	Net
	// Procs is the number of stage processes to start on this host (0:
	// none); ProcsGiven says it was asked for (then it must be at least
	// 1).
	Procs      int
	ProcsGiven bool
	// Pin gives each of the Procs stage processes a CPU of its own.
	Pin bool
}

// Decide decides where the stages run, given the launcher's environment
// env when found (FromEnv): Procs processes of this host (LocalProcs);
// under a launcher, the process of stage 0 drives and serves stage 0
// (LaunchedFirst), every other serves its stage (LaunchedStage), placed as
// Net.StagePlace says; at StageAddrs (Remote); else in this process. The
// Place is this process's (Stage -1 for the driver; the addresses where
// they are known). It refuses, naming the flags, settings that contradict
// each other, and, for the transport that carries the run (Transport.For
// the placement), timeouts too short for it (CheckTimeout) or links left
// unsecured (CheckCredentials).
func (s Setup) Decide(env Config, found bool) (Where, Place, error) {
	w, pl, err := s.decide(env, found)
	if err == nil && w != LaunchedFirst && w != LaunchedStage { // StagePlace checked those
		err = s.CheckTimeout(s.Transport.For(w, pl.Addrs))
		if err == nil && w == Remote {
			err = s.CheckCredentials(s.Transport.For(w, pl.Addrs), pl.Addrs)
		}
	}
	return w, pl, err
}

// decide is Decide but for the checks of the timeouts and credentials
// outside a launcher.
func (s Setup) decide(env Config, found bool) (Where, Place, error) {
	c := s.Credentials
	switch {
	case s.Pin && s.Procs < 1:
		return 0, Place{}, &runspec.Error{Setting: "pin", Reason: "places {procs}'s stage processes on CPUs of their own: give {procs} (pin this process with {cpus})"}
	case s.Procs < 1 && s.ProcsGiven:
		return 0, Place{}, &runspec.Error{Setting: "procs", Value: strconv.Itoa(s.Procs), Reason: "the number of stage processes, at least 1 (without {procs} the stages run in this process)"}
	case s.Procs > 0 && s.StageAddrs != "":
		return 0, Place{}, &runspec.Error{Setting: "procs", Value: strconv.Itoa(s.Procs) + " and {stage_addrs}", Reason: "{procs} starts the stages here, {stage_addrs} names stages started elsewhere; choose one"}
	case s.Procs > 0 && found:
		return 0, Place{}, &runspec.Error{Setting: "procs", Value: strconv.Itoa(s.Procs), Reason: "the " + env.Launcher + " environment has started the stages already"}
	case s.Procs > 0 && c.Dir != "":
		return 0, Place{}, &runspec.Error{Setting: "procs", Value: strconv.Itoa(s.Procs) + " and {certs}", Reason: "{procs} makes throw-away certificates (or runs plaintext with {insecure})"}
	case s.Procs > 0:
		return LocalProcs, Place{Stage: -1}, nil
	case found:
		pl, err := s.StagePlace(-1, "", env, true)
		switch {
		case err != nil:
			return 0, pl, err
		case pl.Stage == 0:
			return LaunchedFirst, pl, nil
		}
		return LaunchedStage, pl, nil
	case s.StageAddrs != "":
		addrs, err := s.Addrs()
		if err != nil {
			return 0, Place{}, err
		}
		return Remote, Place{Addrs: addrs, Stage: -1, AddrsFrom: "{stage_addrs}"}, nil
	case c.Dir != "" || c.Insecure:
		return 0, Place{}, &runspec.Error{Setting: "certs", Value: "and {insecure}", Reason: "they secure the links to stages in other processes: give {procs} or {stage_addrs} with them"}
	}
	return InProcess, Place{Stage: -1}, nil
}

// Fit refuses a plan whose stages have these costs
// (graphsplit.Plan.Costs) that the places cannot host as the run's
// placement (pl.Spec) shares the stages among them (Hosts): s.Procs stage
// processes (0: none), or the addresses in pl, this process's Place
// (none: in this process), one per process. The error names the flags
// and the way out.
func (s Setup) Fit(costs []float64, pl Place) error {
	var err error
	switch {
	case s.Procs > 0:
		_, err = Hosts(pl.Spec, costs, s.Procs, "procs")
	case len(pl.Addrs) > 0:
		_, err = pl.Hosts(costs)
	}
	return err
}

// LocalDriver starts a pipeline's stage processes on this host when its
// driver connects, once the model is cut, and connects the driver to
// them: its Connect is a train.Config.Connect.
type LocalDriver struct {
	// Config says which processes to start (StartLocal); its Exited is
	// LocalDriver's own.
	Config LocalConfig
	// Procs, if positive, is the number of processes to start for the
	// plan Connect is given, each hosting the stages Spec's placement
	// gives it (Hosts), in place of Config's Stages and Hosts.
	Procs int
	// Spec is the run (resolved, as Place.Spec): its placement, and what
	// the default Dial announces.
	Spec runspec.Spec
	// Started, if not nil, is called once the processes have started,
	// before the driver connects to them (to say where they run).
	Started func(*Local)
	// Dial is the connector of the driver to the processes l started
	// (with l's addresses and certificates); nil: Place{Addrs: l.Addrs,
	// Stage: -1, Spec: Spec}.Connector with Credentials{Dir: l.Certs,
	// Insecure: Config.Insecure} and grpcnet's default timeout.
	Dial func(l *Local) ConnectFunc

	local *Local
}

// Connect starts the stage processes (StartLocal) and opens the driver's
// endpoint to them with Dial. A process that exits before the endpoint is
// open ends the connecting, and the error says which ("stage 1 exited
// before the pipeline was up (signal: killed); its error is above": its
// standard error went to Config.Stderr), not how the connecting broke
// off (a process hosting several stages is named by its stages). A
// process that exited with an error is named only if none is found
// killed by a signal within exitSettle: a peer killed in the handshake
// makes the other exit too, and the one killed is named. Once
// connected, every process has loaded its certificate, and
// Connect removes the throw-away certificates (Local.Certs), so that a
// driver killed later leaves none behind. An error of StartLocal is
// returned as it is, nothing started
// (Local is nil). Whatever it returns, Stop ends the processes; Connect
// called again after Stop starts new ones, as a restarted pipeline needs
// (train.Config.MaxRestarts).
func (d *LocalDriver) Connect(ctx context.Context, plan *graphsplit.Plan) (transport.Endpoint, error) {
	d.local = nil
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c := d.Config
	if d.Procs > 0 && plan != nil {
		hosts, err := Hosts(d.Spec, plan.Costs(), d.Procs, "procs")
		if err != nil {
			return nil, err
		}
		c.Stages, c.Hosts = len(plan.Stages), hosts
	}
	var exits atomic.Int32 // exits being reported: their report is the cause
	c.Exited = func(i int, err error) {
		exits.Add(1)
		name := fmt.Sprintf("stage %d", i)
		if c.Hosts != nil {
			name = stageNames(c.Hosts[i])
		}
		if !killed(err) {
			// It may have exited because a peer died in their handshake:
			// the peer killed, the first cause, is named if it is found
			// within exitSettle (its report cancels ctx first).
			settle := time.NewTimer(exitSettle)
			select {
			case <-ctx.Done():
			case <-settle.C:
			}
			settle.Stop()
		}
		cancel(errors.Errorf("%s exited before the pipeline was up (%v); its error is above", name, err))
	}
	l, err := StartLocal(c)
	if err != nil {
		return nil, err
	}
	d.local = l
	if d.Started != nil {
		d.Started(l)
	}
	dial := d.Dial
	if dial == nil {
		dial = func(l *Local) ConnectFunc {
			return Place{Addrs: l.Addrs, Stage: -1, Spec: d.Spec}.Connector(Credentials{Dir: l.Certs, Insecure: c.Insecure}, 0)
		}
	}
	ep, err := dial(l)(ctx, plan)
	if err != nil && exits.Load() > 0 { // the connecting broke off because a process exited: say which
		settle := time.NewTimer(2 * exitSettle)
		select {
		case <-ctx.Done():
		case <-settle.C:
		}
		settle.Stop()
	}
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	if err == nil && l.Certs != "" {
		// Every process has loaded its certificate: a driver killed from
		// now on leaves none behind.
		if rerr := os.RemoveAll(l.Certs); rerr != nil {
			_ = ep.Close()
			return nil, errors.Wrap(rerr, "removing the throw-away certificates")
		}
	}
	return ep, err
}

// exitSettle is how long Connect waits, after a stage process exited with
// an error before the pipeline was up, for another to be found killed by
// a signal (the process that died first, whose death the first one
// reported): that one is named.
const exitSettle = 300 * time.Millisecond

// killed reports whether a process ended by err (exec.Cmd.Wait's) was
// killed by a signal.
func killed(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == -1
}

// Local is the processes the last Connect started; nil before, or when
// they did not start.
func (d *LocalDriver) Local() *Local { return d.local }

// Stop ends the stage processes the last Connect started, waiting at most
// grace for them to exit (Local.Stop); nil when none started.
func (d *LocalDriver) Stop(grace time.Duration) error {
	if d.local == nil {
		return nil
	}
	return d.local.Stop(grace)
}

// ServeBeside runs serve in a goroutine — a stage this process serves
// beside its driver, as stage 0's process does under a launcher
// (LaunchedFirst) — and returns stop, which the caller calls once its
// driver has returned, with the driver's error. After a failed driver,
// stop cancels serve's context at once (the driver may never have
// reached the stage); otherwise it waits at most grace for serve to
// return, as a stage does once its driver stopped it, then cancels it.
// stop waits for serve and returns its error; call it once.
func ServeBeside(ctx context.Context, serve func(context.Context) error, grace time.Duration) (stop func(driverErr error) error) {
	ctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- serve(ctx) }()
	return func(driverErr error) error {
		if driverErr != nil {
			cancel()
		}
		defer cancel()
		select {
		case err := <-served:
			return err
		case <-time.After(grace):
			cancel()
			return <-served
		}
	}
}

// StageHosts is the hosts each of n stages' certificate is valid for:
// hosts itself, one each, when it names one per stage; its one host n
// times (every stage on one host, as StartLocal runs them); or, for fewer
// hosts than stages (processes that each host several, as the run's
// placement gives them once the model is cut), every host for every
// stage. More hosts than stages is an error naming the pipemare command's
// -stages and -hosts.
func StageHosts(hosts []string, n int) ([][]string, error) {
	if n < 1 {
		return nil, &runspec.Error{Setting: "stages", Value: strconv.Itoa(n), Reason: "the number of stages, at least 1"}
	}
	if len(hosts) > n {
		return nil, &runspec.Error{Setting: "stages", Value: fmt.Sprintf("%d and {hosts} with %d hosts", n, len(hosts)), Reason: fmt.Sprintf("give at most one host per stage: %d", n)}
	}
	out := make([][]string, n)
	for i := range out {
		out[i] = hosts
		if len(hosts) == n {
			out[i] = hosts[i : i+1]
		}
	}
	return out, nil
}
