// Package checkpoint saves and restores the state of a pipeline of P
// stages, each possibly in its own process, so that nothing is lost on a
// crash but the work since the last complete checkpoint; and it saves a
// trained model for loading into a freshly built one (SaveModel,
// LoadModel). It knows nothing of the engine: a stage hands it a Shard of
// named tensors and numbers, a coordinator a Manifest.
//
// # Writing and reading
//
//	dir, err := checkpoint.Begin(root, step)             // coordinator
//	fi, err := checkpoint.WriteShard(dir, stage, shard)  // each stage, any process
//	_, err = checkpoint.Commit(root, manifest)           // coordinator, with every stage's fi
//
//	c, err := checkpoint.Latest(root, checkpoint.WithFingerprint(fp))
//	shard, err := c.Shard(stage)                         // or ReadShard(dir, stage, fi) in a stage's process
//
// Begin the next checkpoint only after the previous Commit returned:
// Commit removes any checkpoint newer than the one it commits (what a run
// resumed from an older checkpoint leaves behind), which keeps the
// history of a root linear. One run writes to one root: a fresh run
// started in a root that holds another run's checkpoints replaces them, so
// a driver should refuse a root with a LATEST unless it resumes from it.
//
// # Layout
//
//	root/
//	  LATEST                        "step-000000000120\n": the newest committed checkpoint
//	  step-000000000120/
//	    stage-000.safetensors       stage 0's shard
//	    stage-001.safetensors
//	    MANIFEST.json               written last
//	  step-000000000100/            older complete checkpoints, Keep of them in all
//
// # Formats
//
// A shard, and a model file (ModelExt), is a safetensors file
// (github.com/huggingface/safetensors, the field's format for weights,
// written and read with github.com/nlpodyssey/safetensors): an 8-byte
// little-endian header length N; N bytes of JSON, padded with spaces to a
// multiple of 8, mapping each tensor's name to {"dtype": "F32", "F64",
// "I64" or "I32", "shape": [...], "data_offsets": [begin, end]} plus
// "__metadata__", a map of strings; then the tensors' raw little-endian
// bytes in C order, back to back. Tensors that are views are materialised
// first (gorgonia.org/tensor's own encoders write a view's backing array,
// not its elements). The metadata holds "format" ("pipemare.shard/1" or
// "pipemare.model/1"), "stage" (shards), "data_sha256" (the SHA-256 of the
// tensors' bytes concatenated in the order of their names, so a file
// checks itself without a manifest), and the shard's numbers and strings
// as "int.<name>" (decimal), "float.<name>" (the shortest decimal that
// reads back as the same float64) and "string.<name>". Any safetensors
// reader (Python's safetensors, PyTorch) reads the tensors.
//
// The manifest is JSON (Manifest): format, step, the plan's fingerprint,
// the run's configuration, the data position, the random streams, and per
// stage its file's name, size, SHA-256 and tensors (name, dtype, shape).
//
// # Crash safety
//
// Every file — shard, manifest, LATEST, model — is written to a temporary
// name in its directory, fsynced, renamed to its name, and the directory
// fsynced. Rename is atomic, so after a crash at any instant a name holds
// either its complete durable content or its previous one (or nothing);
// temporary files are never read, and Commit removes those a crash left.
// The order of a checkpoint then gives:
//
//  1. Every shard is durable when WriteShard returns; Commit checks its
//     size and fsyncs it again (covering a writer in another process)
//     before it writes the manifest. So a manifest exists only once every
//     shard it lists is durable: a checkpoint without one is incomplete,
//     and Open refuses it (ErrIncomplete).
//  2. LATEST is replaced only after the manifest is durable, so it always
//     names a complete checkpoint. A crash between the two leaves LATEST
//     on the previous checkpoint, from which the run resumes; the newer
//     one is still complete (Open reads it) and is replaced when the run
//     reaches its step again (Begin empties the directory of its step; if
//     LATEST names it, as after a resume from an older checkpoint, Begin
//     first moves LATEST back to the newest complete one before it).
//  3. Old checkpoints are removed only after LATEST is durable, manifest
//     first and durably, so a crash midway through a removal leaves an
//     incomplete directory, never a complete-looking part of one.
//
// Reading verifies everything, so damage done after the fact (a truncated
// or rewritten file, flipped bits) is an error naming the file and what
// differs, never a partial load: sizes and SHA-256s against the manifest,
// the safetensors structure, each file's data hash, each shard's tensors
// against the manifest, and what the caller expects (WithFingerprint,
// WithStages, WithTensors). Latest does not fall back silently: a
// committed checkpoint that fails verification is a storage failure, not
// the effect of a crash, and falling back would redo work without a word.
// Its error names the previous complete checkpoint, kept by Keep (default
// 2), which the caller may Open explicitly.
//
// What this relies on: a file system that honours fsync and rename (local
// POSIX file systems do; some network file systems do not).
package checkpoint
