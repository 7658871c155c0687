package main

import (
	"strconv"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/zoo"
)

// stageCount is the number of stages r's model is cut into with -stages
// stages ("fine" or a number options.check has checked), so that a command
// can refuse or leave out a schedule before it trains anything.
func stageCount(r zoo.Recipe, stages string) (int, error) {
	m, err := r.Build(r.Run.Microbatch, r.Run.Seed)
	if err != nil {
		return 0, err
	}
	opts := []graphsplit.Option{graphsplit.FineGrained()}
	if stages != "fine" {
		p, _ := strconv.Atoi(stages)
		opts = append(opts, graphsplit.Stages(p))
	}
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, opts...)
	if err != nil {
		return 0, err
	}
	defer plan.Close()
	return len(plan.Stages), nil
}
