package reach

import (
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"gorgonia.org/gorgonia"
)

// Version is the Gorgonia release whose internals this package reads.
const Version = "v0.9.18"

// VersionError is Check's error: the binary links a Gorgonia other than
// Version (Found says which, as the build information or the source path
// names it).
type VersionError struct {
	Found string
	Want  string
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("gorgonia: this binary links %s, but pipemare reads the internals of gorgonia.org/gorgonia %s only (its ops' fields, its tape machine): require that release in go.mod (go get gorgonia.org/gorgonia@%s), without a replace directive", e.Found, e.Want, e.Want)
}

var gate struct {
	once sync.Once
	err  error
}

// Check returns nil when the binary links Gorgonia Version, and a
// *VersionError otherwise. A program's build information names the
// release (a replaced module is refused: its layout is unknown); a test
// binary's has no dependencies, so there the path of Gorgonia's source
// file in the module cache does.
func Check() error {
	gate.once.Do(func() {
		if found := linked(); found != Version {
			gate.err = &VersionError{Found: found, Want: Version}
		}
	})
	return gate.err
}

// linked names the Gorgonia the binary links: its version, "<version> =>
// <replacement>" for a replaced module, or what the source path shows.
func linked() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "gorgonia.org/gorgonia" {
				if d.Replace != nil {
					return d.Version + " => " + d.Replace.Path + " " + d.Replace.Version
				}
				return d.Version
			}
		}
	}
	fn := runtime.FuncForPC(reflect.ValueOf(gorgonia.NewTapeMachine).Pointer())
	if fn == nil {
		return "an unknown release (no build information)"
	}
	file, _ := fn.FileLine(fn.Entry())
	file = filepath.ToSlash(file)
	if _, rest, ok := strings.Cut(file, "gorgonia.org/gorgonia@"); ok {
		v, _, _ := strings.Cut(rest, "/")
		return v
	}
	return "a copy of gorgonia at " + filepath.Dir(file)
}
