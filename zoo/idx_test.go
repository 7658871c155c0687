package zoo

import (
	"bytes"
	"compress/gzip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadIDX(t *testing.T) {
	good := []byte{0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6}
	idx, err := ReadIDX(bytes.NewReader(good))
	require.NoError(t, err)
	require.Equal(t, []int{2, 3}, idx.Dims)
	require.Equal(t, []byte{1, 2, 3, 4, 5, 6}, idx.Data)

	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(good)
	require.NoError(t, zw.Close())
	idx, err = ReadIDX(bytes.NewReader(z.Bytes()))
	require.NoError(t, err)
	require.Equal(t, []int{2, 3}, idx.Dims)

	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"empty":          {nil, "truncated header"},
		"bad magic":      {[]byte{1, 2, 8, 1, 0, 0, 0, 1, 9}, "bad magic"},
		"not bytes":      {[]byte{0, 0, 0x0d, 1, 0, 0, 0, 1, 9}, "not unsigned byte"},
		"truncated dims": {[]byte{0, 0, 8, 2, 0, 0, 0, 2}, "truncated header"},
		"truncated body": {good[:15], "truncated: 3 of 6 bytes"},
		"trailing":       {append(append([]byte{}, good...), 7), "trailing bytes"},
		"corrupt gzip":   {append([]byte{0x1f, 0x8b}, good...), "corrupt gzip"},
	} {
		_, err := ReadIDX(bytes.NewReader(c.data))
		require.ErrorContains(t, err, c.want, name)
	}
}

// TestReadIDXHead: the first n rows of the first dimension are read and
// checked to be there; what follows them is not read, so a body truncated
// or longer after them is not seen; n ≤ 0 or beyond the rows is ReadIDX.
func TestReadIDXHead(t *testing.T) {
	good := []byte{0, 0, 8, 2, 0, 0, 0, 3, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6}
	idx, err := ReadIDXHead(bytes.NewReader(good), 2)
	require.NoError(t, err)
	require.Equal(t, []int{2, 2}, idx.Dims)
	require.Equal(t, []byte{1, 2, 3, 4}, idx.Data)
	idx, err = ReadIDXHead(bytes.NewReader(good[:16]), 2)
	require.NoError(t, err, "the third row is not read")
	require.Equal(t, []byte{1, 2, 3, 4}, idx.Data)
	_, err = ReadIDXHead(bytes.NewReader(good[:15]), 2)
	require.ErrorContains(t, err, "truncated: 3 of 4 bytes")
	for _, n := range []int{0, -1, 3, 4} {
		idx, err = ReadIDXHead(bytes.NewReader(good), n)
		require.NoError(t, err)
		require.Equal(t, []int{3, 2}, idx.Dims, "n %d reads every row", n)
		_, err = ReadIDXHead(bytes.NewReader(append(append([]byte{}, good...), 7)), n)
		require.ErrorContains(t, err, "trailing bytes", "n %d checks the end", n)
	}
}

// TestLoadLimitedReadsTheSameExamples: a recipe's load of the first n
// training examples holds the bytes and labels of the whole file's first
// n, whether the embedded subset was read whole before or not.
func TestLoadLimitedReadsTheSameExamples(t *testing.T) {
	embeddedIDX.Clear()
	r, err := RecipeFor("mlp")
	require.NoError(t, err)
	head, _, err := r.Load("embedded", 100)
	require.NoError(t, err)
	_, cached := embeddedIDX.Load("train-images-idx3-ubyte.gz")
	require.False(t, cached, "a head is not kept as the whole file")
	whole, _, err := LoadFashionMNIST("embedded")
	require.NoError(t, err)
	require.Equal(t, whole.Head(100), head.(*Dataset))
	again, _, err := r.Load("embedded", 100)
	require.NoError(t, err)
	require.Equal(t, head, again)
}

func TestLoadFashionMNIST(t *testing.T) {
	train, test, err := LoadFashionMNIST("embedded")
	require.NoError(t, err)
	require.Equal(t, 8000, train.Len())
	require.Equal(t, 2000, test.Len())
	require.Equal(t, 28, train.Width)
	require.Len(t, train.Images, 8000*784)
	counts := make([]int, 10)
	for _, l := range test.Labels {
		counts[l]++
	}
	for c, n := range counts {
		require.Greater(t, n, 150, "class %d (%s) is represented", c, FashionClasses[c])
	}
	_, _, err = LoadFashionMNIST(t.TempDir())
	require.ErrorContains(t, err, "train-images-idx3-ubyte.gz is missing; install dataset-fashion-mnist")
}
