package zoo

import (
	"gorgonia.org/tensor"
)

// G2P tokens: padding (also "end of pronunciation"), the separator between
// a word and its phonemes, the letters A–Z, then the 39 phonemes.
const (
	tokPad    = 0
	tokSep    = 1
	tokLetter = 2
	tokPhone  = tokLetter + 26
	// G2PVocab is the number of tokens.
	G2PVocab = tokPhone + 39
	// G2PMaxLetters and G2PMaxPhones bound a pair (the subset's limits).
	G2PMaxLetters = 8
	G2PMaxPhones  = 8
	// G2PLen is the model's sequence length: the letters, the separator,
	// the phonemes and an end token, less one (position p predicts p+1).
	G2PLen = G2PMaxLetters + 1 + G2PMaxPhones
)

// G2PData is a grapheme→phoneme data set for a decoder-only Transformer:
// example i is the token sequence "letters SEP phonemes END" (padded), and
// the targets are the next token at the positions from SEP on — the
// phonemes and the end. Accuracy over it is teacher-forced phoneme
// accuracy.
type G2PData struct {
	seqs [][]int // G2PLen+1 tokens each
}

// NewG2PData encodes pairs (longer ones are dropped).
func NewG2PData(pairs []Pair) *G2PData {
	phone := make(map[string]int)
	for i, p := range Phonemes {
		phone[p] = tokPhone + i
	}
	d := &G2PData{}
	for _, p := range pairs {
		if len(p.Word) > G2PMaxLetters || len(p.Phones) > G2PMaxPhones {
			continue
		}
		s := make([]int, G2PLen+1)
		for i, c := range p.Word {
			s[i] = tokLetter + int(c-'A')
		}
		s[G2PMaxLetters] = tokSep
		for i, ph := range p.Phones {
			s[G2PMaxLetters+1+i] = phone[ph]
		}
		d.seqs = append(d.seqs, s)
	}
	return d
}

// Len is the number of pairs.
func (d *G2PData) Len() int { return len(d.seqs) }

// Batch gives x: one-hot input tokens (len(idx)·G2PLen, G2PVocab) and y:
// one-hot next tokens, zero where the next token is not a target.
func (d *G2PData) Batch(m *Model, idx []int) (*tensor.Dense, *tensor.Dense) {
	rows := len(idx) * G2PLen
	xs := make([]float32, rows*G2PVocab)
	ys := make([]float32, rows*G2PVocab)
	for r, i := range idx {
		s := d.seqs[i]
		end := G2PMaxLetters + 1
		for end < len(s)-1 && s[end] != tokPad {
			end++
		}
		for p := 0; p < G2PLen; p++ {
			row := r*G2PLen + p
			xs[row*G2PVocab+s[p]] = 1
			if p >= G2PMaxLetters && p < end { // predict phonemes, then the end
				ys[row*G2PVocab+s[p+1]] = 1
			}
		}
	}
	return tensor.New(tensor.WithShape(rows, G2PVocab), tensor.WithBacking(xs)),
		tensor.New(tensor.WithShape(rows, G2PVocab), tensor.WithBacking(ys))
}
