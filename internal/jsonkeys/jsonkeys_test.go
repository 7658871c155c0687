package jsonkeys

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNotSnakeCase(t *testing.T) {
	var doc any
	require.NoError(t, json.Unmarshal([]byte(`{"wall_ns": 1, "Makespan": 2, "delays": {"3": 4},
		"stages": [{"per_stage": 1, "PerStage": 2, "x2": 0, "_a": 0, "a__b": 0}]}`), &doc))
	require.Equal(t, []string{".Makespan", ".stages[].PerStage", ".stages[]._a", ".stages[].a__b"}, NotSnakeCase(doc))
}
