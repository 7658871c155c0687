package checkpoint

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

const stages = 3

// stageShard is stage i's deterministic shard at step.
func stageShard(step int64, i int) Shard {
	w := make([]float32, 64*(i+1))
	for j := range w {
		w[j] = float32(step)*1000 + float32(i)*100 + float32(j)
	}
	return Shard{
		Tensors: map[string]tensor.Tensor{"weights/W": tensor.New(tensor.WithShape(len(w)/8, 8), tensor.WithBacking(w))},
		Ints:    map[string]int64{"version": step},
		Floats:  map[string]float64{"tau": float64(i + 1)},
	}
}

// save writes a complete checkpoint at step, as a coordinator and its
// stages do.
func save(t *testing.T, root string, step int64, opts ...CommitOption) string {
	t.Helper()
	dir, err := Begin(root, step)
	require.NoError(t, err)
	m := Manifest{Step: step, Fingerprint: "plan-A", Config: json.RawMessage(`{"lr":0.03}`),
		Data:   DataPosition{Epoch: 2, Index: step % 7, Seed: 1},
		Random: map[string][]byte{"dropout/1": {1, 2, 3}}}
	for i := 0; i < stages; i++ {
		fi, err := WriteShard(dir, i, stageShard(step, i))
		require.NoError(t, err)
		m.Stages = append(m.Stages, fi)
	}
	got, err := Commit(root, m, opts...)
	require.NoError(t, err)
	require.Equal(t, dir, got)
	return dir
}

// requireStep opens c's shards and checks they are step's.
func requireStep(t *testing.T, c *Checkpoint, step int64) {
	t.Helper()
	require.Equal(t, step, c.Manifest.Step)
	for i := 0; i < stages; i++ {
		s, err := c.Shard(i)
		require.NoError(t, err)
		requireSameShard(t, stageShard(step, i), s)
	}
}

func steps(t *testing.T, root string) (complete, incomplete []int64) {
	t.Helper()
	entries, err := List(root)
	require.NoError(t, err)
	for _, e := range entries {
		if e.Complete {
			complete = append(complete, e.Step)
		} else {
			incomplete = append(incomplete, e.Step)
		}
	}
	return complete, incomplete
}

func TestCommitLatestAndKeep(t *testing.T) {
	root := filepath.Join(t.TempDir(), "run", "checkpoints")
	_, err := Latest(root)
	require.True(t, errors.Is(err, ErrNoCheckpoint), "%v", err)

	save(t, root, 10)
	c, err := Latest(root, WithFingerprint("plan-A"), WithStages(stages),
		WithTensors(1, []TensorInfo{{Name: "weights/W", Dtype: "float32", Shape: []int{16, 8}}}))
	require.NoError(t, err)
	requireStep(t, c, 10)
	m := c.Manifest
	require.Equal(t, ManifestFormat, m.Format)
	require.JSONEq(t, `{"lr":0.03}`, string(m.Config))
	require.Equal(t, DataPosition{Epoch: 2, Index: 3, Seed: 1}, m.Data)
	require.Equal(t, []byte{1, 2, 3}, m.Random["dropout/1"])
	require.Len(t, m.Stages[2].SHA256, 64)
	b, err := os.ReadFile(filepath.Join(root, "LATEST"))
	require.NoError(t, err)
	require.Equal(t, "step-000000000010\n", string(b))

	save(t, root, 20)
	save(t, root, 30)
	complete, _ := steps(t, root)
	require.Equal(t, []int64{20, 30}, complete, "Keep(2) by default")
	save(t, root, 40, Keep(3))
	save(t, root, 50, Keep(3))
	complete, _ = steps(t, root)
	require.Equal(t, []int64{30, 40, 50}, complete)
	c, err = Latest(root)
	require.NoError(t, err)
	requireStep(t, c, 50)
	_, err = Commit(root, c.Manifest, Keep(0))
	require.ErrorContains(t, err, "Keep(0)")
}

// TestCrashBeforeTheManifest: a run stopped after writing some shards of
// a checkpoint (and a temporary file of another) leaves a directory
// without a manifest. Readers refuse it and keep to the previous one; the
// next Begin of that step starts it afresh; the next Commit removes it.
func TestCrashBeforeTheManifest(t *testing.T) {
	root := t.TempDir()
	save(t, root, 100)
	dir, err := Begin(root, 200)
	require.NoError(t, err)
	_, err = WriteShard(dir, 0, stageShard(200, 0))
	require.NoError(t, err)
	tmp := filepath.Join(dir, ".stage-001.safetensors.tmp-12345")
	require.NoError(t, os.WriteFile(tmp, []byte("half a shard"), 0o644))

	_, err = Open(dir)
	require.True(t, errors.Is(err, ErrIncomplete), "%v", err)
	require.ErrorContains(t, err, "has no MANIFEST.json, which is written last: the run stopped while writing this checkpoint")
	c, err := Latest(root)
	require.NoError(t, err)
	requireStep(t, c, 100)
	_, incomplete := steps(t, root)
	require.Equal(t, []int64{200}, incomplete)

	// The resumed run reaches step 200 again.
	dir, err = Begin(root, 200)
	require.NoError(t, err)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "Begin emptied the leftover")

	// A run that stopped before step 200's manifest, resumed, and reached
	// step 300: the leftover goes.
	_, err = WriteShard(dir, 0, stageShard(200, 0))
	require.NoError(t, err)
	save(t, root, 300)
	complete, incomplete := steps(t, root)
	require.Equal(t, []int64{100, 300}, complete)
	require.Empty(t, incomplete)
}

// TestTemporaryFilesAreIgnoredAndRemoved: a temporary file a crash left in
// a committed checkpoint (a second write of a shard, stopped midway) is
// never read, and the next Commit removes temporary files.
func TestTemporaryFilesAreIgnoredAndRemoved(t *testing.T) {
	root := t.TempDir()
	dir := save(t, root, 1)
	tmp := filepath.Join(dir, ".stage-000.safetensors.tmp-999")
	require.NoError(t, os.WriteFile(tmp, []byte("garbage"), 0o644))
	rootTmp := filepath.Join(root, ".LATEST.tmp-1")
	require.NoError(t, os.WriteFile(rootTmp, []byte("step-000000000099"), 0o644))
	c, err := Latest(root)
	require.NoError(t, err)
	requireStep(t, c, 1)

	dir2, err := Begin(root, 2)
	require.NoError(t, err)
	tmp2 := filepath.Join(dir2, ".stage-002.safetensors.tmp-7")
	require.NoError(t, os.WriteFile(tmp2, []byte("garbage"), 0o644))
	save2 := func() {
		m := Manifest{Step: 2, Fingerprint: "plan-A"}
		for i := 0; i < stages; i++ {
			fi, err := WriteShard(dir2, i, stageShard(2, i))
			require.NoError(t, err)
			m.Stages = append(m.Stages, fi)
		}
		_, err = Commit(root, m, Keep(2))
		require.NoError(t, err)
	}
	save2()
	for _, p := range []string{tmp2, rootTmp} {
		_, err := os.Stat(p)
		require.True(t, os.IsNotExist(err), "%s removed", p)
	}
}

// corruptNewest commits steps 1 and 2, damages step 2 with f, and checks
// that Latest refuses it with an error naming the file and what differs
// and the previous checkpoint, and that the previous one opens.
func corruptNewest(t *testing.T, f func(dir string), want ...string) {
	t.Helper()
	root := t.TempDir()
	prev := save(t, root, 1)
	dir := save(t, root, 2)
	f(dir)
	_, err := Latest(root)
	require.Error(t, err)
	for _, w := range want {
		require.ErrorContains(t, err, w)
	}
	require.ErrorContains(t, err, "the latest checkpoint of "+root+" (step 2) is unusable; the previous complete one is "+prev+": open it with checkpoint.Open")
	c, err := Open(prev)
	require.NoError(t, err)
	requireStep(t, c, 1)
}

func TestDamageIsNamed(t *testing.T) {
	shard := func(dir string) string { return filepath.Join(dir, "stage-001.safetensors") }
	t.Run("truncated shard", func(t *testing.T) {
		corruptNewest(t, func(dir string) {
			st, err := os.Stat(shard(dir))
			require.NoError(t, err)
			require.NoError(t, os.Truncate(shard(dir), st.Size()-10))
		}, "stage-001.safetensors: ", "bytes, the manifest says", "(truncated or rewritten)")
	})
	t.Run("flipped byte", func(t *testing.T) {
		corruptNewest(t, func(dir string) {
			b, err := os.ReadFile(shard(dir))
			require.NoError(t, err)
			b[len(b)-3] ^= 0x40
			require.NoError(t, os.WriteFile(shard(dir), b, 0o644))
		}, "stage-001.safetensors: SHA-256", "the manifest says", "(the file is corrupted)")
	})
	t.Run("missing shard", func(t *testing.T) {
		corruptNewest(t, func(dir string) { require.NoError(t, os.Remove(shard(dir))) }, "stage-001.safetensors: no such file")
	})
	t.Run("missing manifest", func(t *testing.T) {
		corruptNewest(t, func(dir string) { require.NoError(t, os.Remove(filepath.Join(dir, "MANIFEST.json"))) }, "has no MANIFEST.json")
	})
	t.Run("corrupted manifest", func(t *testing.T) {
		corruptNewest(t, func(dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "MANIFEST.json"), []byte(`{"format": 1, "step": 2,`), 0o644))
		}, "MANIFEST.json: not a manifest")
	})
	t.Run("a manifest naming a file elsewhere", func(t *testing.T) {
		corruptNewest(t, func(dir string) {
			editManifest(t, dir, func(m *Manifest) { m.Stages[1].Name = "../../etc/passwd" })
		}, `the manifest names the shard "../../etc/passwd", want "stage-001.safetensors"`)
	})
	t.Run("a manifest moved to another step", func(t *testing.T) {
		corruptNewest(t, func(dir string) { editManifest(t, dir, func(m *Manifest) { m.Step = 7 }) }, "the manifest of step 7 in the directory of step 2")
	})
	t.Run("a shard of another stage", func(t *testing.T) {
		corruptNewest(t, func(dir string) {
			b, err := os.ReadFile(filepath.Join(dir, "stage-000.safetensors"))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(shard(dir), b, 0o644))
			editManifest(t, dir, func(m *Manifest) { m.Stages[1].Size, m.Stages[1].SHA256 = m.Stages[0].Size, m.Stages[0].SHA256 })
		}, "stage-001.safetensors: the shard of stage 0, want stage 1")
	})
	t.Run("a tensor the manifest does not list", func(t *testing.T) {
		corruptNewest(t, func(dir string) {
			editManifest(t, dir, func(m *Manifest) { m.Stages[1].Tensors[0].Shape = []int{8, 16} })
		}, `stage-001.safetensors: tensor "weights/W" is (16, 8) float32, the manifest says (8, 16) float32`)
	})
}

func editManifest(t *testing.T, dir string, f func(*Manifest)) {
	t.Helper()
	path := filepath.Join(dir, "MANIFEST.json")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var m Manifest
	require.NoError(t, json.Unmarshal(b, &m))
	f(&m)
	b, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

func TestExpectations(t *testing.T) {
	root := t.TempDir()
	dir := save(t, root, 5)
	for _, c := range []struct {
		opt  OpenOption
		want string
	}{
		{WithFingerprint("plan-B"), `is of another model or plan: fingerprint "plan-A", want "plan-B"`},
		{WithStages(4), "has 3 stages, want 4"},
		{WithTensors(0, []TensorInfo{{Name: "weights/W", Dtype: "float32", Shape: []int{4, 8}}}), `stage-000.safetensors: tensor "weights/W" is (8, 8) float32, want (4, 8) float32`},
		{WithTensors(2, []TensorInfo{{Name: "weights/W", Dtype: "float64", Shape: []int{24, 8}}}), `tensor "weights/W" is (24, 8) float32, want (24, 8) float64`},
		{WithTensors(1, []TensorInfo{{Name: "bn/mean", Dtype: "float32", Shape: []int{}}}), `stage 1 has no tensor "bn/mean"`},
		{WithTensors(3, nil), "has no stage 3"},
	} {
		_, err := Open(dir, c.opt)
		require.ErrorContains(t, err, c.want)
		_, err = Latest(root, c.opt)
		require.ErrorContains(t, err, c.want)
	}
	c, err := Open(dir)
	require.NoError(t, err)
	_, err = c.Shard(3)
	require.ErrorContains(t, err, "has stages 0..2, not 3")
}

func TestCommitRefusesAnIncompleteSet(t *testing.T) {
	root := t.TempDir()
	_, err := Commit(root, Manifest{Step: 3, Stages: []FileInfo{{Name: "stage-000.safetensors", SHA256: string(make([]byte, 64))}}})
	require.ErrorContains(t, err, "step 3 was not begun")
	dir, err := Begin(root, 3)
	require.NoError(t, err)
	fi0, err := WriteShard(dir, 0, stageShard(3, 0))
	require.NoError(t, err)
	fi1 := fi0
	fi1.Name = "stage-001.safetensors"
	_, err = Commit(root, Manifest{Step: 3, Stages: []FileInfo{fi0, fi1}})
	require.ErrorContains(t, err, "stage 1's shard")
	_, err = Commit(root, Manifest{Step: 3, Stages: []FileInfo{fi1}})
	require.ErrorContains(t, err, `the manifest names the shard "stage-001.safetensors", want "stage-000.safetensors"`)
	short := fi0
	short.Size--
	_, err = Commit(root, Manifest{Step: 3, Stages: []FileInfo{short}})
	require.ErrorContains(t, err, "stage 0 reported")
	_, err = Commit(root, Manifest{Step: 3})
	require.ErrorContains(t, err, "no stages")
	_, err = Commit(root, Manifest{Step: 3, Stages: []FileInfo{fi0}, Config: json.RawMessage("{")})
	require.ErrorContains(t, err, "the configuration is not JSON")
	_, err = Latest(root)
	require.True(t, errors.Is(err, ErrNoCheckpoint), "nothing was committed: %v", err)
}

// TestCrashBetweenManifestAndLatest: the new checkpoint is complete but
// LATEST still names the previous one, from which the run resumes; when it
// reaches the step again it writes it afresh.
func TestCrashBetweenManifestAndLatest(t *testing.T) {
	root := t.TempDir()
	save(t, root, 1)
	dir := save(t, root, 2)
	require.NoError(t, os.WriteFile(filepath.Join(root, "LATEST"), []byte("step-000000000001\n"), 0o644))
	c, err := Latest(root)
	require.NoError(t, err)
	requireStep(t, c, 1)
	c, err = Open(dir)
	require.NoError(t, err, "the unpublished checkpoint is complete")
	requireStep(t, c, 2)
	save(t, root, 2)
	c, err = Latest(root)
	require.NoError(t, err)
	requireStep(t, c, 2)
}

// TestResumeFromAnOlderCheckpoint: a run resumed from step 1 (its step 2
// being damaged) commits its own step 2; the damaged one is replaced, and
// checkpoints beyond the new one (an abandoned branch) are removed.
func TestResumeFromAnOlderCheckpoint(t *testing.T) {
	root := t.TempDir()
	save(t, root, 1, Keep(3))
	save(t, root, 2, Keep(3))
	save(t, root, 3, Keep(3))
	require.NoError(t, os.WriteFile(filepath.Join(root, "LATEST"), []byte("step-000000000001\n"), 0o644))
	save(t, root, 2, Keep(3))
	complete, incomplete := steps(t, root)
	require.Equal(t, []int64{1, 2}, complete, "step 3 belonged to the abandoned branch")
	require.Empty(t, incomplete)
}

// TestResumeAfterDamage: the newest checkpoint is damaged; the run
// resumes from the previous one explicitly and, reaching the damaged
// one's step, rewrites it. While it does, LATEST names the previous one,
// so a crash then leaves a checkpoint to resume from.
func TestResumeAfterDamage(t *testing.T) {
	root := t.TempDir()
	prev := save(t, root, 1)
	newest := save(t, root, 2)
	require.NoError(t, os.Remove(filepath.Join(newest, "stage-002.safetensors")))
	_, err := Latest(root)
	require.ErrorContains(t, err, "the previous complete one is "+prev)
	c, err := Open(prev)
	require.NoError(t, err)
	requireStep(t, c, 1)

	dir, err := Begin(root, 2)
	require.NoError(t, err)
	c, err = Latest(root)
	require.NoError(t, err, "LATEST stepped back while step 2 is rewritten")
	requireStep(t, c, 1)
	_, err = WriteShard(dir, 0, stageShard(2, 0)) // and a crash here
	require.NoError(t, err)
	c, err = Latest(root)
	require.NoError(t, err)
	requireStep(t, c, 1)
	save(t, root, 2)
	c, err = Latest(root)
	require.NoError(t, err)
	requireStep(t, c, 2)

	// With no earlier complete checkpoint, LATEST goes.
	lone := t.TempDir()
	save(t, lone, 5)
	_, err = Begin(lone, 5)
	require.NoError(t, err)
	_, err = Latest(lone)
	require.True(t, errors.Is(err, ErrNoCheckpoint), "%v", err)
}

func TestLatestNamesItsTrouble(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "LATEST"), []byte("../../x\n"), 0o644))
	_, err := Latest(root)
	require.ErrorContains(t, err, `LATEST holds "../../x", not a checkpoint's name (corrupted)`)
	save(t, root, 1)
	require.NoError(t, os.Remove(filepath.Join(root, "step-000000000001", "stage-000.safetensors")))
	_, err = Latest(root)
	require.ErrorContains(t, err, "(step 1) is unusable, and there is no earlier complete one")
}

// TestWriteFile: WriteFile replaces a file whole and leaves no temporary
// file behind.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	require.NoError(t, WriteFile(path, []byte("old")))
	require.NoError(t, WriteFile(path, []byte("new content")))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "new content", string(b))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.ErrorContains(t, WriteFile(filepath.Join(dir, "missing", "x"), nil), filepath.Join(dir, "missing", "x"))
}

// TestOpenARoot: Open given the root the checkpoints were committed under
// opens the one LATEST names, with the same checks; a root where none was
// committed is ErrNoCheckpoint, naming what it lacks; a checkpoint's
// directory without its manifest stays ErrIncomplete.
func TestOpenARoot(t *testing.T) {
	root := t.TempDir()
	save(t, root, 10)
	save(t, root, 20)
	c, err := Open(root)
	require.NoError(t, err)
	requireStep(t, c, 20)
	require.Equal(t, filepath.Join(root, stepName(20)), c.Dir)
	_, err = Open(root, WithStages(5))
	require.ErrorContains(t, err, "has 3 stages, want 5")

	dir, err := Begin(root, 30)
	require.NoError(t, err)
	_, err = Open(dir)
	require.True(t, errors.Is(err, ErrIncomplete), "%v", err)
	c, err = Open(root)
	require.NoError(t, err)
	requireStep(t, c, 20)

	empty := t.TempDir()
	_, err = Open(empty)
	require.True(t, errors.Is(err, ErrNoCheckpoint), "%v", err)
	require.ErrorContains(t, err, "holds neither a MANIFEST.json (a checkpoint's directory) nor a LATEST (a root checkpoints were committed under)")
}
