package runout

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReplayTableIsInTheDocs: docs/schedules.md holds the replay table as
// this engine prints it (regenerate it with
// go run ./cmd/pipemare schedule -table).
func TestReplayTableIsInTheDocs(t *testing.T) {
	var b strings.Builder
	require.NoError(t, WriteReplayTable(&b))
	require.True(t, strings.HasPrefix(b.String(), "| schedule | P | N | steps | bubble | formula |"))
	require.Contains(t, b.String(), "| zb-h1 | 8 | 8 | 1 | 0.2258 | 0.2258 | 8.00 | 8.00 | 1 | 1 |")
	doc, err := os.ReadFile("../docs/schedules.md")
	require.NoError(t, err)
	require.Contains(t, string(doc), b.String(), "docs/schedules.md is not the table this engine prints")
}
