// Package launch is where a pipeline's stages run when they run in
// several processes: where each process stands, how it reaches the
// others, and the stage processes a program starts on its own host. The
// pipemare command's train and stage are built on it; a Go program that
// embeds the library uses it the same way.
//
// # Where a process stands
//
// FromEnv reads this process's place from the environment a launcher
// gives it: torchrun's RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, or a
// Kubernetes JobSet's Indexed Job (JOB_COMPLETION_INDEX, and the names
// that make up the pods' DNS names
// <jobset>-<job>-<jobIndex>-<podIndex>.<subdomain>). The process of rank
// i, or pod index i, hosts stage i when there are as many stages as
// processes, else the stages the run's placement gives it (Launched, once
// the plan is cut); rank 0 hosts stage 0 and the driver. The processes'
// addresses follow from the environment where it determines them.
// Without a launcher, ParseAddrs reads the addresses from a command line.
//
// A Place holds the result: the stages' addresses, the stage this process
// serves (or -1, the driver) and where it listens, including a listening
// socket inherited as a file descriptor ("fd:3"). Its Connector, given
// Credentials (a directory of certificates as package pki writes them, or
// plaintext on loopback), is what train.Config.Connect and
// train.ServeStage take: it opens the process's grpcnet endpoint once the
// model is cut. Net.Connector does the same with the command line's
// settings, over shared memory (shmnet, Place.OpenShm) when its Transport
// says so (TransportShm; the default, TransportAuto, is shared memory when
// every stage address is loopback, as for the stage processes StartLocal
// starts, and gRPC when any is not: Transport.Resolve, applied alike by
// every process to the same addresses).
//
// # Several stages per process
//
// Fewer processes than stages, one address each, host the stages the
// run's placement gives them (runspec.Placed: balanced by the plan's
// estimated costs, graphsplit.Plan.Costs — the same on every process —
// contiguous by count, round robin or a V; by default the schedule's), a
// process's k-th stage at its address's port+k; Place.Hosts lists them,
// Hosts for a number of processes. Place.Layout is what every peer's
// transport is given — each stage's address and the links between
// processes, a link between two stages of one process left off the
// network — and the handshake compares the links. A process hosting
// several stages has a Place for each (Net.StagesPlaces, CheckHosted;
// Launched under a launcher, whose processes on one node share its ports:
// Place.Stride spaces a process's stages so that none collide), and
// Net.StagesConnector opens their endpoints joined by transport.Colocated,
// for train.ServeStages.
//
// # Stage processes on this host
//
// StartLocal starts one process per stage, or per list of stages
// (LocalConfig.Hosts), on loopback — of this program, or another, with
// the arguments the caller makes for each — each handed a listener per
// stage as file descriptors 3, 4, … and, unless insecure, throw-away
// certificates; the returned Local says where they serve and
// Stop ends them, removing the certificates. The caller owns the
// processes: on Linux they die with it even when it is killed (OwnChild,
// which also serves any child process a program must not outlive).
//
// # A command's settings
//
// Net is how a process reaches the others as a command line gives it (the
// stages' addresses, the credentials, the connect, stall and receive
// timeouts); its checks,
// StagePlace (where a stage process stands, from its settings and a
// launcher's environment) and its Connector return errors that name the
// setting (*runspec.Error: stage_addrs, certs, connect_timeout, …), which
// a command words as its flags. A Place carries the run's specification,
// and Place.Identity is what every transport's handshake compares. Setup decides where a training process's
// stages run (Where: in the process, stage processes of its host, remote,
// or as a launcher placed it) and refuses settings that contradict each
// other; Fit checks a plan against the places. LocalDriver starts the
// stage processes once the driver's model is cut and connects the driver
// to them, naming a process that exits before the pipeline is up, and
// removes their throw-away certificates once connected; after Stop, its
// Connect starts them anew (a restart, train.Config.MaxRestarts);
// ServeBeside serves stage 0 beside its driver, as the first process of a
// launched pipeline does. StageHosts is the hosts of each stage for the
// certificates.
//
// Pin places a process on CPUs and gives it one P per CPU, which
// ServeOnOneP raises to two for a process serving several stages over
// gRPC; OwnCPU is the CPU of stage process i when each has one of its
// own.
package launch
