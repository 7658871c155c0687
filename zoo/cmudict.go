package zoo

import (
	"bufio"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/pipemare/pipemare"
	"github.com/pkg/errors"
)

// Phonemes are CMUdict's 39 phonemes (stress removed).
var Phonemes = []string{"AA", "AE", "AH", "AO", "AW", "AY", "B", "CH", "D", "DH", "EH", "ER", "EY", "F", "G", "HH", "IH", "IY", "JH", "K", "L", "M", "N", "NG", "OW", "OY", "P", "R", "S", "SH", "T", "TH", "UH", "UW", "V", "W", "Y", "Z", "ZH"}

// Pair is a word and its pronunciation.
type Pair struct {
	Word   string
	Phones []string
}

// LoadCMUdict reads the grapheme→phoneme pairs (train.tsv, test.tsv: a word
// of letters A–Z, a tab, phonemes separated by spaces) from dir, or from the
// subset embedded in the binary when dir is "". It names the file and line
// of anything it cannot read.
func LoadCMUdict(dir string) (train, test []Pair, err error) {
	var fsys fs.FS
	where := dir
	if dir == "" {
		if fsys, err = fs.Sub(pipemare.Data, "testdata/cmudict"); err != nil {
			return nil, nil, err
		}
		where = "embedded subset"
	} else {
		fsys = os.DirFS(dir)
	}
	read := func(name string) ([]Pair, error) {
		f, err := fsys.Open(name)
		if err != nil {
			return nil, errors.Wrapf(err, "cmudict (%s): %s is missing", where, name)
		}
		defer f.Close()
		pairs, err := readPairs(f.(io.Reader))
		return pairs, errors.Wrapf(err, "cmudict (%s): %s", where, name)
	}
	if train, err = read("train.tsv"); err != nil {
		return nil, nil, err
	}
	if test, err = read("test.tsv"); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

func readPairs(r io.Reader) ([]Pair, error) {
	known := make(map[string]bool)
	for _, p := range Phonemes {
		known[p] = true
	}
	var out []Pair
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if text == "" {
			continue
		}
		word, phones, ok := strings.Cut(text, "\t")
		if !ok {
			return nil, errors.Errorf("line %d: no tab between word and phonemes", line)
		}
		if word == "" || strings.ContainsFunc(word, func(r rune) bool { return r < 'A' || r > 'Z' }) {
			return nil, errors.Errorf("line %d: word %q is not letters A–Z", line, word)
		}
		p := Pair{Word: word, Phones: strings.Fields(phones)}
		if len(p.Phones) == 0 {
			return nil, errors.Errorf("line %d: %s has no phonemes", line, word)
		}
		for _, ph := range p.Phones {
			if !known[ph] {
				return nil, errors.Errorf("line %d: %q is not a phoneme", line, ph)
			}
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no pairs")
	}
	return out, nil
}
