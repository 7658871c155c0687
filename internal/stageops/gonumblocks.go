package stageops

// gonum's blocking (blas/gonum: blockSize, minParBlock), in every build:
// the convolution (Conv) cuts its dot products where gonum's product of
// the whole patch matrix would.
const (
	gemmBlock    = 64
	gemmParBlock = 4
)

// blockedGemm reports whether gonum computes an m×n×k product block by
// block on goroutines: four blocks of output or more, and work to do (a
// zero alpha or k leaves gonum only the scaling by beta).
func blockedGemm(m, n, k int, zeroAlpha bool) bool {
	blocks := func(d int) int { return (d + gemmBlock - 1) / gemmBlock }
	return m > 0 && n > 0 && k > 0 && !zeroAlpha && blocks(m)*blocks(n) >= gemmParBlock
}
