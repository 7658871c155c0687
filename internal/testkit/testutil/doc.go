// Package testutil holds the helpers shared by the project's tests:
// comparing gorgonia values (Floats, RelErr, RequireBits), hashing a plan's
// trained weights (PlanSHA256) and telling whether the race detector is on
// (RaceEnabled).
//
// Its contract:
//
//   - It is imported only from tests: _test.go files, and the other test
//     kits under internal/testkit (exectest, zootest) that are themselves
//     imported only from _test.go files. No command and no package of the
//     library depends on it.
//   - It imports gorgonia, tensor, testify and the standard library, and no
//     package of this module, so that any package's in-package tests
//     (package x, not x_test) can import it without an import cycle:
//     were it to import graphsplit, graphsplit's own tests could not use
//     it. Hence PlanSHA256 takes anything with a WeightsSHA256 method
//     rather than a *graphsplit.Plan.
//   - Its helpers fail the test (testing.TB's Fatalf) rather than return
//     errors, so they must be called from the test's goroutine.
//
// The module's layering test (layers_test.go at its root, which puts it
// on the lowest floor) checks the first two.
package testutil
