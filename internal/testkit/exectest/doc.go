// Package exectest checks, for tests, that stage programs compute on the
// executor (internal/tape) the bits gorgonia's tape machine computes:
// graphsplit's tests do it on the test models, zoo's on the zoo's.
package exectest
