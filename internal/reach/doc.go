// Package reach owns every reach of this module into Gorgonia's internals:
// the unexported fields of its ops and solvers read by reflection, the
// names of its unexported types, and its tape machine's program and
// executor (go:linkname, unsafe). Nothing else in the module uses
// reflection on Gorgonia's values, go:linkname or unsafe on them.
//
// All of it was read from one release, Version, and sits behind one gate:
// Check says whether the binary links that release, and every function
// that reads an internal returns Check's *VersionError first, naming the
// release found and the one to require, instead of reading a layout that
// may have changed. graphsplit.Split calls Check before it cuts anything,
// so a program built against another Gorgonia fails at its first cut with
// that error, not with wrong numbers later.
package reach
