// Package pipemare is the root of PipeMare-Go, asynchronous pipeline-parallel
// training (PipeMare: Yang et al., MLSys 2021) for Gorgonia models.
//
// The work is in the subpackages: graphsplit cuts a model's graph into
// stages, asyncvm runs them as a pipeline, rescheduler and correction are
// PipeMare's two techniques as solver decorators, and zoo trains real models
// on real data. This package only embeds the default data set (Data).
package pipemare
