package zoo

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"io"

	"github.com/pkg/errors"
)

// IDX is an array read from an IDX file (the MNIST format): unsigned bytes
// with their dimensions.
type IDX struct {
	Dims []int
	Data []byte
}

// ReadIDX reads an unsigned-byte IDX array, gzipped or not. It says what is
// wrong with a file that is not one: a bad magic number, a truncated header
// or body, trailing bytes.
func ReadIDX(r io.Reader) (*IDX, error) { return ReadIDXHead(r, 0) }

// ReadIDXHead reads the first n entries of an unsigned-byte IDX array's
// first dimension (all of them when n ≤ 0 or n is beyond them): Dims[0] is
// how many it read. It decompresses and reads only those, so it checks
// the header and that they are there, but neither the rest of the body
// nor what follows it; with all entries it is ReadIDX.
func ReadIDXHead(r io.Reader, n int) (*IDX, error) {
	br := bufio.NewReader(r)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, errors.Wrap(err, "idx: corrupt gzip stream")
		}
		defer zr.Close()
		br = bufio.NewReader(zr)
	}
	var head [4]byte
	if _, err := io.ReadFull(br, head[:]); err != nil {
		return nil, errors.Wrap(err, "idx: truncated header")
	}
	if head[0] != 0 || head[1] != 0 {
		return nil, errors.Errorf("idx: bad magic number % x: not an IDX file", head)
	}
	if head[2] != 0x08 {
		return nil, errors.Errorf("idx: element type 0x%02x is not unsigned byte (0x08)", head[2])
	}
	dims := int(head[3])
	if dims == 0 || dims > 4 {
		return nil, errors.Errorf("idx: %d dimensions, want 1 to 4", dims)
	}
	out := &IDX{Dims: make([]int, dims)}
	size := 1
	for i := range out.Dims {
		var d [4]byte
		if _, err := io.ReadFull(br, d[:]); err != nil {
			return nil, errors.Wrap(err, "idx: truncated header")
		}
		out.Dims[i] = int(binary.BigEndian.Uint32(d[:]))
		if out.Dims[i] <= 0 || out.Dims[i] > 1<<24 {
			return nil, errors.Errorf("idx: dimension %d is %d", i, out.Dims[i])
		}
		size *= out.Dims[i]
		if size > 1<<31 {
			return nil, errors.New("idx: array larger than 2 GiB")
		}
	}
	all := out.Dims[0]
	if n > 0 && n < all {
		size = size / all * n
		out.Dims[0] = n
	}
	out.Data = make([]byte, size)
	if n, err := io.ReadFull(br, out.Data); err != nil {
		return nil, errors.Errorf("idx: truncated: %d of %d bytes (%v)", n, size, out.Dims)
	}
	if out.Dims[0] < all {
		return out, nil
	}
	if _, err := br.ReadByte(); err != io.EOF {
		if err != nil {
			return nil, errors.Wrap(err, "idx: corrupt data")
		}
		return nil, errors.Errorf("idx: trailing bytes after the %v array", out.Dims)
	}
	return out, nil
}
