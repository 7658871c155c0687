package graphsplit

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pkg/errors"
)

// WeightsSHA256 returns the SHA-256, as lowercase hex, of the current values
// of p.Learnables in plan order (the order given to Split), each written as
// its elements in row-major order as raw little-endian IEEE 754 bytes (4 per
// float32, 8 per float64), with nothing between them: no shapes, no names.
// Two runs hold bit-identical weights exactly when their hashes agree
// (up to a SHA-256 collision), which is how runs are compared for
// bit-identity.
//
// It reads the learnables' values, which a pipeline updates in place:
// call it when no pipeline is running on p (after asyncvm's Flush, for the
// trained weights). It fails, naming the learnable, for a learnable without
// a value or of another dtype.
func (p *Plan) WeightsSHA256() (string, error) {
	h := sha256.New()
	for i, n := range p.Learnables {
		if err := tensorutil.WriteLittleEndian(h, n.Value()); err != nil {
			return "", errors.Wrapf(err, "graphsplit: hashing learnable %d (%s)", i, n.Name())
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
