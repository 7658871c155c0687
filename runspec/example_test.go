package runspec_test

import (
	"fmt"
	"strings"

	"github.com/pipemare/pipemare/runspec"
)

// A run is the recipe's name plus what was changed: its JSON form is what
// settings.json records and a stage process is started from, and two
// processes' identities agree only if their settings that reach a stage do.
func Example() {
	seed := int64(2)
	driver := runspec.Spec{Model: "mlp", Method: "pipemare", LR: 0.2, Seed: &seed}
	fmt.Println(string(driver.JSON()))

	stage, err := runspec.Parse([]byte(`{"model":"mlp","method":"pipemare","lr":0.1,"seed":2}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	err = driver.Identity("plan-sha256").Check(stage.Identity("plan-sha256"), "stage 1")
	fmt.Println(err)
	for _, d := range runspec.Diff(stage, driver) {
		fmt.Printf("%s: %s then, %s now\n", d.Setting, d.Then, d.Now)
	}

	// A library error names the setting; a command words it its own way.
	err = runspec.Spec{Model: "mlp", Stages: "3", Cut: "6"}.Check()
	fmt.Println(err)
	fmt.Println(err.(runspec.Worded).Words(func(s string) string { return "-" + strings.ReplaceAll(s, "_", "-") }))
	// Output:
	// {"model":"mlp","method":"pipemare","lr":0.2,"seed":2}
	// stage 1 runs with another lr: 0.1 there, 0.2 here (every process of a run must be started with the same run specification)
	// lr: 0.1 then, 0.2 now
	// stages 3 and cut 6: the cut makes 2 stages; give one of the two
	// -stages 3 and -cut 6: the cut makes 2 stages; give one of the two
}
