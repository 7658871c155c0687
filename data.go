package pipemare

import "embed"

// Data holds the committed data subsets, so a built binary trains anywhere:
// testdata/fashion-mnist has the first 8,000 training and 2,000 test images
// of Fashion-MNIST (gzipped IDX, with its licence), testdata/cmudict
// grapheme→phoneme pairs from CMUdict (TSV, with its licence). Package zoo
// reads them.
//
//go:embed testdata/fashion-mnist/*.gz testdata/fashion-mnist/LICENSE testdata/cmudict/*.tsv testdata/cmudict/LICENSE
var Data embed.FS
