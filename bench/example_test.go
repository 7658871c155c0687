package bench_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/pipemare/pipemare/bench"
)

// Time the zoo MLP to 60 % test accuracy in this process on every CPU,
// two seeds, each training a pipemare train child of the program at exe
// ("": this one) — here a stand-in that reports its epochs' accuracies and
// clocks, as train's report.json does.
func ExampleTimeToAccuracy() {
	placements, err := bench.TargetPlacements([]string{"cores"}, 1, "1")
	if err != nil {
		log.Fatal(err)
	}
	tta := bench.TimeToAccuracy{Target: 0.6}
	err = tta.Run(context.Background(), []int64{1, 2}, placements, func(_ context.Context, p bench.TargetPlacement, seed int64) ([]byte, string, error) {
		// A real run: tta.RunTargetChildren(ctx, "", bench.TargetArgs(flags, cut), dir, seeds, placements, os.Stdout).
		report := fmt.Sprintf(`{"result": {"weights_sha256": "w%d", "report": {"samples_per_sec": 1000},
			"epochs": [{"test_accuracy": 0.55, "clock_ns": 2000000000}, {"test_accuracy": 0.6%d, "clock_ns": 4000000000}]}}`, seed, seed)
		return []byte(report), "", nil
	}, io.Discard)
	if err != nil {
		log.Fatal(err)
	}
	tta.Table(os.Stdout)
	// Output:
	// | placement | reached 0.6000 | time to target, s | epochs | samples/s |
	// |---|---|---|---|---|
	// | cores | 2 of 2 | 4.00 (4.00–4.00) | 2 | 1000 (1000–1000) |
}
