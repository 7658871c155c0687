package graphsplit

import "github.com/pipemare/pipemare/internal/stageops"

// UseFastBLAS makes every matrix product of the process — the user's
// graph's and every stage's — run on the stage ops' BLAS (gorgonia.Use):
// gonum's, bit for bit, on one goroutine per kernel where a stage's
// kernels may use only one, and faster for float32; built with -tags
// openblas, OpenBLAS (results then differ from the default build's by
// float rounding). Importing this package changes no BLAS: a program calls
// UseFastBLAS before any of its graphs computes (gorgonia reads its BLAS
// without a lock); it installs the BLAS once, and later calls from any
// goroutine change nothing. train.Train, train.ServeStage and the pipemare
// command call it.
func UseFastBLAS() { stageops.UseFastBLAS() }
