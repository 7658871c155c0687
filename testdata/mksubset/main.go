// Command mksubset rebuilds the committed Fashion-MNIST subset in
// testdata/fashion-mnist from the Debian package dataset-fashion-mnist:
// the first 8,000 training and the first 2,000 test images with their
// labels, in IDX format, gzipped without names or timestamps so the output
// is the same bytes on every run.
//
//	apt-get install dataset-fashion-mnist
//	go run ./testdata/mksubset
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"flag"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/pkg/errors"
)

func main() {
	src := flag.String("from", "/usr/share/datasets/fashion-mnist", "directory of the full gzipped IDX files")
	dst := flag.String("to", "testdata/fashion-mnist", "output directory")
	train := flag.Int("train", 8000, "training images to keep")
	test := flag.Int("test", 2000, "test images to keep")
	flag.Parse()
	for _, f := range []struct {
		name string
		keep int
	}{
		{"train-images-idx3-ubyte.gz", *train},
		{"train-labels-idx1-ubyte.gz", *train},
		{"t10k-images-idx3-ubyte.gz", *test},
		{"t10k-labels-idx1-ubyte.gz", *test},
	} {
		if err := subset(filepath.Join(*src, f.name), filepath.Join(*dst, f.name), f.keep); err != nil {
			log.Fatalf("%s: %v (is dataset-fashion-mnist installed?)", f.name, err)
		}
	}
}

// subset copies the first keep items of an IDX file, fixing the count in its
// header.
func subset(from, to string, keep int) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		return err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return err
	}
	if len(raw) < 8 || raw[0] != 0 || raw[1] != 0 || raw[2] != 8 {
		return errors.New("not an unsigned-byte IDX file")
	}
	dims := int(raw[3])
	header := 4 + 4*dims
	if len(raw) < header {
		return errors.New("truncated header")
	}
	count := int(binary.BigEndian.Uint32(raw[4:8]))
	if keep > count {
		return errors.Errorf("asked for %d items, the file has %d", keep, count)
	}
	item := 1
	for d := 1; d < dims; d++ {
		item *= int(binary.BigEndian.Uint32(raw[4+4*d:]))
	}
	out := append([]byte(nil), raw[:header]...)
	binary.BigEndian.PutUint32(out[4:8], uint32(keep))
	out = append(out, raw[header:header+keep*item]...)
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression) // no name, no mtime
	if err != nil {
		return err
	}
	if _, err := zw.Write(out); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(to, buf.Bytes(), 0o644)
}
