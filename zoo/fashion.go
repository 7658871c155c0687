package zoo

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/pipemare/pipemare"
	"github.com/pkg/errors"
)

// FashionDir is where Debian's dataset-fashion-mnist package puts the full
// data set.
const FashionDir = "/usr/share/datasets/fashion-mnist"

// FashionEnv names a directory holding the four gzipped Fashion-MNIST IDX
// files, used instead of the embedded subset.
const FashionEnv = "PIPEMARE_FASHION_DIR"

// FashionClasses are Fashion-MNIST's label names.
var FashionClasses = []string{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"}

// Dataset is labelled images: Images[i*Width*Height:] is image i, one
// byte per pixel as the IDX file has it (0 to 255); Batch scales each to
// [0, 1] as float32(b)/255. Keeping the bytes makes a load cost only the
// decompression, not a float32 copy four times its size of examples a run
// may never read (a stage process reads none).
type Dataset struct {
	Name          string
	Images        []byte
	Labels        []int
	Width, Height int
	Classes       int
}

// Len is the number of examples.
func (d *Dataset) Len() int { return len(d.Labels) }

// Pixels is the size of one image.
func (d *Dataset) Pixels() int { return d.Width * d.Height }

// Head returns the first n examples (all if n ≤ 0 or beyond the end),
// sharing memory.
func (d *Dataset) Head(n int) *Dataset {
	if n <= 0 || n >= d.Len() {
		return d
	}
	c := *d
	c.Images = d.Images[:n*d.Pixels()]
	c.Labels = d.Labels[:n]
	return &c
}

// LoadFashionMNIST loads Fashion-MNIST's training and test sets from dir:
// "" means the directory in $PIPEMARE_FASHION_DIR, else the full set of the
// Debian package when it is installed, else the subset embedded in the
// binary (8,000 training and 2,000 test images); "embedded" forces the
// subset.
func LoadFashionMNIST(dir string) (train, test *Dataset, err error) {
	return loadFashionMNIST(dir, 0)
}

// loadFashionMNIST is LoadFashionMNIST with only the first limit training
// images read (all when limit ≤ 0): a run of -limit examples decompresses
// no more, unless the embedded subset was read whole already.
func loadFashionMNIST(dir string, limit int) (train, test *Dataset, err error) {
	var fsys fs.FS
	name := dir
	switch {
	case dir == "embedded":
		fsys, name = embeddedFashion(), embeddedName
	case dir != "":
		fsys = os.DirFS(dir)
	case os.Getenv(FashionEnv) != "":
		name = os.Getenv(FashionEnv)
		fsys = os.DirFS(name)
	case exists(filepath.Join(FashionDir, "train-images-idx3-ubyte.gz")):
		fsys, name = os.DirFS(FashionDir), FashionDir
	default:
		fsys, name = embeddedFashion(), embeddedName
	}
	if train, err = loadSplit(fsys, name, "train", limit); err != nil {
		return nil, nil, err
	}
	if test, err = loadSplit(fsys, name, "t10k", 0); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// embeddedName is how errors name the embedded subset.
const embeddedName = "embedded subset"

func embeddedFashion() fs.FS {
	sub, err := fs.Sub(pipemare.Data, "testdata/fashion-mnist")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// embeddedIDX keeps the embedded subset's files decompressed once read, for
// the process's life (7.9 MB): decompressing them is most of a load's time
// (2 s under the race detector), and a command or a test suite loads them
// many times. The bytes are never modified: every load's Dataset shares
// them.
var embeddedIDX sync.Map // file name → *IDX

// loadSplit loads split's first n examples from fsys (all when n ≤ 0).
func loadSplit(fsys fs.FS, where, split string, n int) (*Dataset, error) {
	read := func(file string) (*IDX, error) {
		embedded := where == embeddedName
		if idx, ok := embeddedIDX.Load(file); ok && embedded {
			return idx.(*IDX), nil
		}
		f, err := fsys.Open(file)
		if err != nil {
			return nil, errors.Wrapf(err, "fashion-mnist (%s): %s is missing; install dataset-fashion-mnist or set %s", where, file, FashionEnv)
		}
		defer f.Close()
		idx, err := ReadIDXHead(f.(io.Reader), n)
		if err != nil {
			return nil, errors.Wrapf(err, "fashion-mnist (%s): %s", where, file)
		}
		if embedded && n <= 0 { // only whole files are kept
			embeddedIDX.Store(file, idx)
		}
		return idx, nil
	}
	imgs, err := read(split + "-images-idx3-ubyte.gz")
	if err != nil {
		return nil, err
	}
	labels, err := read(split + "-labels-idx1-ubyte.gz")
	if err != nil {
		return nil, err
	}
	if len(imgs.Dims) != 3 || len(labels.Dims) != 1 || imgs.Dims[0] != labels.Dims[0] {
		return nil, errors.Errorf("fashion-mnist (%s): %s images %v and labels %v do not match", where, split, imgs.Dims, labels.Dims)
	}
	d := &Dataset{Name: "fashion-mnist/" + split, Height: imgs.Dims[1], Width: imgs.Dims[2], Classes: 10}
	d.Images = imgs.Data // shared with embeddedIDX: never modified
	d.Labels = make([]int, len(labels.Data))
	for i, b := range labels.Data {
		if int(b) >= d.Classes {
			return nil, errors.Errorf("fashion-mnist (%s): label %d of example %d is not a class", where, b, i)
		}
		d.Labels[i] = int(b)
	}
	return d, nil
}
