// Package tensorutil holds the few tensor helpers the engine needs on
// gorgonia values: flat element-wise sums and scales that ignore how
// gorgonia shaped a value, finiteness checks, row slicing into microbatches
// and sizes in bytes.
package tensorutil
