package checkpoint

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/nlpodyssey/safetensors"
	"github.com/pipemare/pipemare/internal/faultpoint"
	"github.com/pkg/errors"
	"gorgonia.org/tensor"
)

// Shard is what one pipeline stage saves: named tensors (weights, solver
// tensors, BatchNorm statistics) and named numbers (a weight version,
// counters) and strings (the kinds of its solver's layers).
type Shard struct {
	Tensors map[string]tensor.Tensor
	Ints    map[string]int64
	Floats  map[string]float64
	Strings map[string]string
}

// TensorInfo is a tensor's name, dtype (gorgonia's name: "float32",
// "float64", "int64", "int32") and shape (empty for a 0-d tensor).
type TensorInfo struct {
	Name  string `json:"name"`
	Dtype string `json:"dtype"`
	Shape []int  `json:"shape"`
}

func (t TensorInfo) String() string {
	return fmt.Sprintf("%q %v %s", t.Name, tensor.Shape(t.Shape), t.Dtype)
}

// The file formats: safetensors files whose __metadata__ "format" says
// which.
const (
	shardFormat = "pipemare.shard/1"
	modelFormat = "pipemare.model/1"
)

// Metadata keys of a tensor file besides the numbers and strings.
const (
	keyFormat = "format"
	keyStage  = "stage"
	keyData   = "data_sha256"
	preInt    = "int."
	preFloat  = "float."
	preString = "string."
)

var dtypes = map[tensor.Dtype]safetensors.DType{
	tensor.Float32: safetensors.F32,
	tensor.Float64: safetensors.F64,
	tensor.Int64:   safetensors.I64,
	tensor.Int32:   safetensors.I32,
}

// view is a tensor's little-endian bytes, as safetensors writes them.
type view struct {
	dt    safetensors.DType
	shape []uint64
	data  []byte
}

func (v view) DType() safetensors.DType { return v.dt }
func (v view) Shape() []uint64          { return v.shape }
func (v view) Data() []byte             { return v.data }
func (v view) DataLen() uint64          { return uint64(len(v.data)) }

// encode returns the safetensors views and metadata of tensors, numbers
// and strings, under format (and stage, for a shard).
func encode(format string, stage int, s Shard) (map[string]view, map[string]string, []TensorInfo, error) {
	views := make(map[string]view, len(s.Tensors))
	var infos []TensorInfo
	for name, t := range s.Tensors {
		if name == "" || name == "__metadata__" {
			return nil, nil, nil, errors.Errorf("checkpoint: a tensor cannot be named %q", name)
		}
		v, info, err := toView(name, t)
		if err != nil {
			return nil, nil, nil, err
		}
		views[name] = v
		infos = append(infos, info)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	meta := map[string]string{keyFormat: format, keyData: dataHash(views)}
	if format == shardFormat {
		meta[keyStage] = strconv.Itoa(stage)
	}
	for name, v := range s.Ints {
		meta[preInt+name] = strconv.FormatInt(v, 10)
	}
	for name, v := range s.Floats {
		meta[preFloat+name] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	for name, v := range s.Strings {
		meta[preString+name] = v
	}
	for _, names := range []map[string]bool{keys(s.Ints), keys(s.Floats), keys(s.Strings)} {
		if names[""] {
			return nil, nil, nil, errors.New("checkpoint: a number or string cannot be named \"\"")
		}
	}
	return views, meta, infos, nil
}

func keys[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// toView materialises t (a sliced view's Data is not its elements) and
// returns its little-endian bytes.
func toView(name string, t tensor.Tensor) (view, TensorInfo, error) {
	if t == nil {
		return view{}, TensorInfo{}, errors.Errorf("checkpoint: tensor %q is nil", name)
	}
	dt, ok := dtypes[t.Dtype()]
	if !ok {
		return view{}, TensorInfo{}, errors.Errorf("checkpoint: tensor %q is %v; a checkpoint holds float32, float64, int64 and int32", name, t.Dtype())
	}
	d, ok := t.(*tensor.Dense)
	if !ok {
		return view{}, TensorInfo{}, errors.Errorf("checkpoint: tensor %q is a %T; a checkpoint holds dense tensors", name, t)
	}
	if d.RequiresIterator() {
		d = d.Materialize().(*tensor.Dense)
	}
	shape := []uint64{} // not nil: JSON [] for a 0-d tensor
	info := TensorInfo{Name: name, Dtype: t.Dtype().String(), Shape: []int{}}
	for _, n := range d.Shape() {
		shape = append(shape, uint64(n))
		info.Shape = append(info.Shape, n)
	}
	size := d.Shape().TotalSize()
	b := make([]byte, 0, size*int(dt.Size()))
	switch t.Dtype() {
	case tensor.Float32:
		for _, x := range d.Float32s()[:size] {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
	case tensor.Float64:
		for _, x := range d.Float64s()[:size] {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		}
	case tensor.Int64:
		for _, x := range d.Int64s()[:size] {
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		}
	case tensor.Int32:
		for _, x := range d.Int32s()[:size] {
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		}
	}
	return view{dt: dt, shape: shape, data: b}, info, nil
}

// dataHash is the SHA-256 of the tensors' bytes in the order of their
// names, which a file carries to check itself without a manifest.
func dataHash(views map[string]view) string {
	names := make([]string, 0, len(views))
	for n := range views {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		h.Write(views[n].data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeTensors writes a safetensors file atomically.
func writeTensors(dir, name, format string, stage int, s Shard) (FileInfo, error) {
	views, meta, infos, err := encode(format, stage, s)
	if err != nil {
		return FileInfo{}, err
	}
	size, sum, err := writeAtomic(dir, name, func(w io.Writer) error {
		return safetensors.SerializeToWriter(views, meta, w)
	})
	if err != nil {
		return FileInfo{}, err
	}
	if infos == nil {
		infos = []TensorInfo{}
	}
	return FileInfo{Name: name, Size: size, SHA256: sum, Tensors: infos}, nil
}

// readTensors reads and checks the safetensors file path of format (and
// stage): its structure, its data hash, and, when want is not nil, its
// size, SHA-256 and tensors against want. It returns the decoded Shard.
func readTensors(path, format string, stage int, want *FileInfo) (Shard, []TensorInfo, error) {
	fail := func(format string, args ...interface{}) (Shard, []TensorInfo, error) {
		return Shard{}, nil, errors.Errorf("checkpoint: %s: %s", path, fmt.Sprintf(format, args...))
	}
	buf, err := os.ReadFile(path)
	if err != nil {
		return Shard{}, nil, errors.Wrap(err, "checkpoint")
	}
	if want != nil {
		if int64(len(buf)) != want.Size {
			return fail("%d bytes, the manifest says %d (truncated or rewritten)", len(buf), want.Size)
		}
		sum := sha256.Sum256(buf)
		if got := hex.EncodeToString(sum[:]); got != want.SHA256 {
			return fail("SHA-256 %s, the manifest says %s (the file is corrupted)", got, want.SHA256)
		}
	}
	n, md, err := safetensors.ReadMetadata(buf)
	if err != nil {
		return fail("not a valid safetensors file (%v): truncated or corrupted", err)
	}
	data := buf[8+n:]
	meta := md.Metadata()
	if meta[keyFormat] != format {
		return fail("format %q, want %q", meta[keyFormat], format)
	}
	if format == shardFormat && meta[keyStage] != strconv.Itoa(stage) {
		return fail("the shard of stage %s, want stage %d", meta[keyStage], stage)
	}
	s := Shard{Tensors: map[string]tensor.Tensor{}, Ints: map[string]int64{}, Floats: map[string]float64{}, Strings: map[string]string{}}
	for k, v := range meta {
		var err error
		switch {
		case k == keyFormat || k == keyData || (k == keyStage && format == shardFormat):
		case strings.HasPrefix(k, preInt):
			s.Ints[k[len(preInt):]], err = strconv.ParseInt(v, 10, 64)
		case strings.HasPrefix(k, preFloat):
			s.Floats[k[len(preFloat):]], err = strconv.ParseFloat(v, 64)
		case strings.HasPrefix(k, preString):
			s.Strings[k[len(preString):]] = v
		default:
			return fail("unknown metadata %q", k)
		}
		if err != nil {
			return fail("metadata %q: %v", k, err)
		}
	}
	views := map[string]view{}
	var infos []TensorInfo
	for name, ti := range md.Tensors() {
		t, info, err := fromView(name, ti, data)
		if err != nil {
			return fail("%v", err)
		}
		s.Tensors[name] = t
		infos = append(infos, info)
		views[name] = view{data: data[ti.DataOffsets[0]:ti.DataOffsets[1]]}
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	if infos == nil {
		infos = []TensorInfo{}
	}
	if got := dataHash(views); got != meta[keyData] {
		return fail("the tensors' SHA-256 is %s, the file says %s (the file is corrupted)", got, meta[keyData])
	}
	if want != nil {
		if err := sameTensors(want.Tensors, infos); err != nil {
			return fail("%v", err)
		}
	}
	return s, infos, nil
}

// fromView decodes one tensor of a safetensors file.
func fromView(name string, ti *safetensors.TensorInfo, data []byte) (tensor.Tensor, TensorInfo, error) {
	var dt tensor.Dtype
	for g, s := range dtypes {
		if s == ti.DType {
			dt = g
		}
	}
	if dt == (tensor.Dtype{}) {
		return nil, TensorInfo{}, errors.Errorf("tensor %q is %v, which a checkpoint does not hold", name, ti.DType)
	}
	info := TensorInfo{Name: name, Dtype: dt.String(), Shape: []int{}}
	for _, n := range ti.Shape {
		if n > math.MaxInt32 {
			return nil, TensorInfo{}, errors.Errorf("tensor %q: dimension %d", name, n)
		}
		info.Shape = append(info.Shape, int(n))
	}
	b := data[ti.DataOffsets[0]:ti.DataOffsets[1]]
	var backing interface{}
	switch dt {
	case tensor.Float32:
		x := make([]float32, len(b)/4)
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		backing = x
	case tensor.Float64:
		x := make([]float64, len(b)/8)
		for i := range x {
			x[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
		backing = x
	case tensor.Int64:
		x := make([]int64, len(b)/8)
		for i := range x {
			x[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
		backing = x
	case tensor.Int32:
		x := make([]int32, len(b)/4)
		for i := range x {
			x[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
		backing = x
	}
	return tensor.New(tensor.WithShape(info.Shape...), tensor.WithBacking(backing)), info, nil
}

// sameTensors compares two sorted tensor lists, naming the first
// difference.
func sameTensors(want, got []TensorInfo) error {
	w, g := index(want), index(got)
	for _, t := range want {
		h, ok := g[t.Name]
		switch {
		case !ok:
			return errors.Errorf("tensor %q is missing", t.Name)
		case h.Dtype != t.Dtype || !tensor.Shape(h.Shape).Eq(tensor.Shape(t.Shape)):
			return errors.Errorf("tensor %q is %v %s, the manifest says %v %s", t.Name, tensor.Shape(h.Shape), h.Dtype, tensor.Shape(t.Shape), t.Dtype)
		}
	}
	for _, t := range got {
		if _, ok := w[t.Name]; !ok {
			return errors.Errorf("tensor %q is not in the manifest", t.Name)
		}
	}
	return nil
}

func index(ts []TensorInfo) map[string]TensorInfo {
	m := make(map[string]TensorInfo, len(ts))
	for _, t := range ts {
		m[t.Name] = t
	}
	return m
}

// shardName is the file name of stage's shard.
func shardName(stage int) string { return fmt.Sprintf("stage-%03d.safetensors", stage) }

// WriteShard writes the shard of stage into the checkpoint directory dir
// (from Begin), atomically and durably (temporary file, fsync, rename,
// fsync of dir), and returns what the manifest records of it. Stages may
// call it concurrently, from other processes too: each writes its own
// file. Views are materialised; tensors must be dense float32, float64,
// int64 or int32.
func WriteShard(dir string, stage int, s Shard) (FileInfo, error) {
	if stage < 0 {
		return FileInfo{}, errors.Errorf("checkpoint: stage %d", stage)
	}
	fi, err := writeTensors(dir, shardName(stage), shardFormat, stage, s)
	if err == nil {
		step, _ := parseStepName(filepath.Base(filepath.Clean(dir)))
		faultpoint.Reach(faultpoint.Point{Name: faultpoint.ShardWritten, Step: step, Stage: stage})
	}
	return fi, err
}

// ReadShard reads the shard fi describes from the checkpoint directory
// dir, checking its size, its SHA-256, its structure and its tensors
// against fi; a stage in another process calls it with the FileInfo of
// its stage from the manifest.
func ReadShard(dir string, stage int, fi FileInfo) (Shard, error) {
	if err := checkName(fi.Name, shardName(stage)); err != nil {
		return Shard{}, err
	}
	s, _, err := readTensors(filepath.Join(dir, fi.Name), shardFormat, stage, &fi)
	return s, err
}

func checkName(got, want string) error {
	if got != want {
		return errors.Errorf("checkpoint: the manifest names the shard %q, want %q", got, want)
	}
	return nil
}
