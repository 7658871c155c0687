package train_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
)

// TestWriteMemory: the table at the recipe's N and its solver, then at
// N = 1, each with PipeDream's need; a recipe whose N is 1 gets one.
func TestWriteMemory(t *testing.T) {
	m, err := zoo.CNN(16, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	defer plan.Close()
	r, err := zoo.RecipeFor("cnn")
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, train.WriteMemory(&b, r, plan))
	out := b.String()
	require.True(t, strings.HasPrefix(out, "\nmemory besides activations, cnn's recipe (N = 4, Momentum(0.9)):\n"), out)
	require.Equal(t, 2, strings.Count(out, "PipeDream needs"), out) // the recipe's N and N = 1
	require.Contains(t, out, "4 stages, N = 1")

	r.Run.Microbatches = 1
	b.Reset()
	require.NoError(t, train.WriteMemory(&b, r, plan))
	require.Equal(t, 1, strings.Count(b.String(), "PipeDream needs"), b.String())
}

// TestMeasurePlan: one stage per layer with every stage timed, or the
// stages asked for, balanced by the times the cut was chosen by; the
// report has the heading, the tables and the memory.
func TestMeasurePlan(t *testing.T) {
	r, err := zoo.RecipeFor("mlp")
	require.NoError(t, err)
	p, err := train.MeasurePlan(r, 8, 0, schedule.Schedule{})
	require.NoError(t, err)
	require.Equal(t, "mlp", p.Model.Name)
	require.Equal(t, 8, p.Model.Batch)
	require.Len(t, p.Plan.Stages, 3)
	require.Len(t, p.Times, 3)
	require.Nil(t, p.Plan.Balance)
	var b strings.Builder
	require.NoError(t, p.Write(&b))
	require.True(t, strings.HasPrefix(b.String(), "mlp at microbatch 8: 3 stages\n"), b.String())
	require.Contains(t, b.String(), "\nmemory besides activations, mlp's recipe")
	p.Close()

	p, err = train.MeasurePlan(r, 8, 2, schedule.Schedule{})
	require.NoError(t, err)
	defer p.Close()
	require.Len(t, p.Plan.Stages, 2)
	require.NotNil(t, p.Plan.Balance)
	require.Equal(t, p.Plan.Balance.Times, p.Times)

	_, err = train.MeasurePlan(r, 8, 100, schedule.Schedule{})
	require.Error(t, err)
}
