package main

import (
	"strings"
	"testing"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
)

func TestWriteMemory(t *testing.T) {
	m, err := zoo.CNN(16, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, writeMemory(&b, "cnn", plan))
	out := b.String()
	require.Contains(t, out, "N = 4, Momentum(0.9)")
	require.Equal(t, 2, strings.Count(out, "PipeDream needs"), out) // the recipe's N and N = 1
	require.Contains(t, out, "4 stages, N = 1")
	require.Error(t, writeMemory(&b, "gpt", plan))
}
