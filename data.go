package pipemare

import "embed"

// Data holds the committed data subsets, so a built binary trains anywhere:
// testdata/fashion-mnist has the first 8,000 training and 2,000 test images
// of Fashion-MNIST (gzipped IDX, with its licence). Package zoo reads it.
//
//go:embed testdata/fashion-mnist/*.gz testdata/fashion-mnist/LICENSE
var Data embed.FS
