// Package bench measures trainings of pipemare train run as child
// processes, with the command lines the command gives it (ChildArgs).
//
// A Bench is what a placement of a training buys against one process on
// one CPU, over interleaved rounds (RunChildren, TrainChild); its runs must
// train the same weights. A TimeToAccuracy trains seeds in placements
// (TargetPlacements, RunTargetChildren), reads each epoch's clock from the
// run's report and tabulates the time to a test accuracy per placement.
package bench
