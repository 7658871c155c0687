package rundir_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/pipemare/pipemare/rundir"
)

// Before a run trains: where it starts (afresh here, as the directory
// holds no checkpoint), and its output directory checked writable.
func ExampleStartPoint() {
	out := filepath.Join(os.TempDir(), "pipemare-example-run")
	defer os.RemoveAll(out)
	var now rundir.Settings // rundir.NewSettings(…) of the run about to start
	runDir, from := rundir.ResumeTarget(rundir.ResumeAuto, out)
	c, err := rundir.StartPoint(runDir, from, rundir.ResumeIfAny, now)
	if err != nil {
		log.Fatal(err)
	}
	d := rundir.Dir{Path: runDir, Files: []string{"report.json", rundir.SettingsFile}}
	if err := d.Prepare(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("continues a checkpoint:", c != nil)
	// Output: continues a checkpoint: false
}
