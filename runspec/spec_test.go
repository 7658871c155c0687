package runspec_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/transport"
)

// TestJSONRoundTrip: a spec's JSON form holds what was changed and
// nothing else, and Parse reads it back to the same spec and hash.
func TestJSONRoundTrip(t *testing.T) {
	zero, seed, t2 := 0, int64(3), 0.5
	s := runspec.Spec{Model: "mlp", Method: "pipemare", LR: 0.2, T1: &zero, T2: &t2, Seed: &seed, Cut: "6"}
	require.JSONEq(t, `{"model":"mlp","method":"pipemare","cut":"6","lr":0.2,"t1":0,"t2":0.5,"seed":3}`, string(s.JSON()))
	back, err := runspec.Parse(s.JSON())
	require.NoError(t, err)
	require.Equal(t, s, back)
	require.Equal(t, s.Hash(), back.Hash())
	require.NotEqual(t, s.Hash(), runspec.Spec{Model: "mlp"}.Hash())
}

// TestParseRefuses: an unknown key, a spec without a model and a value
// out of range are refused, naming the setting.
func TestParseRefuses(t *testing.T) {
	for in, want := range map[string]string{
		`{"model":"mlp","learning_rate":0.1}`: `spec: not a run specification: json: unknown field "learning_rate"`,
		`{"lr":0.1}`:                          "spec: names no model",
		`{"model":"mlp","t2":1}`:              "t2 1: must be in [0, 1) (0: off)",
		`{"model":"mlp","kernels":"quick"}`:   `kernels "quick": exact or fast`,
	} {
		_, err := runspec.Parse([]byte(in))
		var se *runspec.Error
		require.ErrorAs(t, err, &se, in)
		require.EqualError(t, err, want, in)
	}
}

// TestErrorWords: an error's settings, its own and those its reason
// names, are worded as the caller words them.
func TestErrorWords(t *testing.T) {
	e := &runspec.Error{Setting: "stages", Value: "3", Reason: "{cut} 6 makes 2 stages"}
	require.Equal(t, "stages 3: cut 6 makes 2 stages", e.Error())
	require.Equal(t, "-stages 3: -cut 6 makes 2 stages", e.Words(func(s string) string { return "-" + s }))
}

// TestDiff: the settings that differ, in field order, with both values;
// a pointer one side leaves out is "default" there, another field its
// zero value.
func TestDiff(t *testing.T) {
	seed := int64(2)
	a := runspec.Spec{Model: "mlp", LR: 0.1, Microbatches: 4}
	b := runspec.Spec{Model: "mlp", LR: 0.2, Microbatches: 4, Seed: &seed}
	require.Equal(t, []runspec.Difference{{Setting: "lr", Then: "0.1", Now: "0.2"}, {Setting: "seed", Then: "default", Now: "2"}}, runspec.Diff(a, b))
	require.Empty(t, runspec.Diff(a, a))
	type other struct {
		X int `json:"x"`
		Y int `json:"y,omitempty"`
	}
	require.Equal(t, []runspec.Difference{{Setting: "y", Then: "0", Now: "1"}}, runspec.Diff(other{X: 1}, other{X: 1, Y: 1}))
}

// TestIdentity: a stage's identity lists every setting that reaches it,
// left-alone ones as "default", not where the data is read from nor the
// cut (the plan's fingerprint covers it); peers with another -lr disagree
// on lr, naming both values.
func TestIdentity(t *testing.T) {
	s := runspec.Spec{Model: "mlp", Data: "/data/here", Cut: "6", LR: 0.1}
	id := s.Identity("fp")
	require.Equal(t, "fp", id.Plan)
	names := map[string]string{}
	for _, kv := range id.Settings {
		names[kv.Name] = kv.Value
	}
	require.Equal(t, "mlp", names["model"])
	require.Equal(t, "0.1", names["lr"])
	require.Equal(t, "default", names["seed"])
	for _, not := range []string{"data", "cut", "stages", "test_limit"} {
		require.NotContains(t, names, not)
	}
	there := s
	there.Data, there.Cut = "/elsewhere", ""
	require.NoError(t, id.Check(there.Identity("fp"), "stage 1"))
	there.LR = 0.2
	err := id.Check(there.Identity("fp"), "stage 1")
	var me *transport.MismatchError
	require.ErrorAs(t, err, &me)
	require.Equal(t, transport.MismatchError{Peer: "stage 1", Setting: "lr", Mine: "0.1", Theirs: "0.2"}, *me)
}

// TestEverySettingReachesTheIdentity: a spec that differs in any one
// field has another identity, naming that field, but for where the data
// is read from, the cut (the plan's fingerprint covers it) and the test
// examples.
func TestEverySettingReachesTheIdentity(t *testing.T) {
	base := runspec.Spec{Model: "mlp"}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		other := base
		v := reflect.ValueOf(&other).Elem().Field(i)
		switch f.Type.Kind() {
		case reflect.String:
			v.SetString("x")
		case reflect.Int, reflect.Int64:
			v.SetInt(3)
		case reflect.Float64:
			v.SetFloat(0.5)
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Pointer:
			v.Set(reflect.New(f.Type.Elem())) // a zero that is given: 0 is a value of its own
		default:
			t.Fatalf("field %s: a kind this test does not set", f.Name)
		}
		err := base.Identity("fp").Check(other.Identity("fp"), "stage 1")
		switch name {
		case "data", "stages", "cut", "test_limit":
			require.NoError(t, err, name)
		default:
			var me *transport.MismatchError
			require.ErrorAs(t, err, &me, name)
			require.Equal(t, name, me.Setting)
		}
	}
}

// TestDecodeRenamed: a key under its old name is read as the new one,
// unless the new one is there too; other keys are left alone.
func TestDecodeRenamed(t *testing.T) {
	type rec struct {
		T1   int    `json:"t1"`
		Name string `json:"name"`
	}
	renamed := map[string]string{"t1_steps": "t1"}
	var r rec
	require.NoError(t, runspec.DecodeRenamed([]byte(`{"t1_steps": 5, "name": "a"}`), &r, renamed))
	require.Equal(t, rec{T1: 5, Name: "a"}, r)
	r = rec{}
	require.NoError(t, runspec.DecodeRenamed([]byte(`{"t1_steps": 5, "t1": 7}`), &r, renamed))
	require.Equal(t, rec{T1: 7}, r, "the new key wins")
	require.Error(t, runspec.DecodeRenamed([]byte(`[1]`), &r, renamed))
}

// TestPlacedFollowsTheSchedule: with no placement given, the stages are
// placed as the schedule places them on its workers (interleaved round
// robin, zb-v in a V), balanced by cost for a schedule of one stage per
// worker; any placement suits the latter, only its own the former; an
// unknown name lists the names. Check refuses what Placed refuses.
func TestPlacedFollowsTheSchedule(t *testing.T) {
	for _, c := range []struct {
		name, schedule string
		want           schedule.Placement
	}{{"", "interleaved", schedule.RoundRobin}, {"", "zb-v", schedule.VShape}, {"", "pipemare", schedule.Balanced}, {"", "", schedule.Balanced},
		{"round-robin", "pipemare", schedule.RoundRobin}, {"v", "1f1b", schedule.VShape}, {"v", "zb-v", schedule.VShape},
		{"contiguous", "pipemare", schedule.Contiguous}, {"balanced", "1f1b", schedule.Balanced}} {
		sch, err := runspec.ScheduleNamed(c.schedule)
		if c.schedule == "" {
			sch, err = schedule.Schedule{}, nil
		}
		require.NoError(t, err)
		got, err := runspec.Placed(c.name, sch)
		require.NoError(t, err, "%s %s", c.name, c.schedule)
		require.Equal(t, c.want, got, "%q under %s", c.name, c.schedule)
	}
	_, err := runspec.Placed("contiguous", schedule.ZBV())
	require.EqualError(t, err, "placement contiguous: schedule zb-v places its stages v: give placement v, or leave it to the schedule")
	_, err = runspec.Placed("balanced", schedule.Interleaved(2))
	require.EqualError(t, err, "placement balanced: schedule interleaved places its stages round-robin: give placement round-robin, or leave it to the schedule")
	err = runspec.Spec{Model: "mlp", Schedule: "interleaved", Placement: "zigzag"}.Check()
	require.EqualError(t, err, `placement "zigzag": one of contiguous, round-robin, v, balanced (default: the schedule's)`)
	require.NoError(t, runspec.Spec{Model: "mlp", Schedule: "interleaved", Placement: "round-robin"}.Check())
}

// TestPipeMareVIsPlacedByTheSpec: PipeMare over virtual stages takes the
// placement the spec names (its workers any of contiguous, round robin or
// a V), contiguous by default, and refuses balanced, which needs the
// stages' costs.
func TestPipeMareVIsPlacedByTheSpec(t *testing.T) {
	for name, want := range map[string]schedule.Placement{"": schedule.Contiguous, "contiguous": schedule.Contiguous, "round-robin": schedule.RoundRobin, "v": schedule.VShape} {
		spec := runspec.Spec{Model: "cnn", Schedule: "pipemare-v", Placement: name}
		require.NoError(t, spec.Check(), "%q", name)
		sch, err := spec.ScheduleNamed()
		require.NoError(t, err)
		require.Equal(t, want, sch.Place, "%q", name)
		got, err := runspec.Placed(spec.Placement, sch)
		require.NoError(t, err)
		require.Equal(t, want, got, "%q: the processes host what the schedule's workers run", name)
	}
	err := runspec.Spec{Model: "cnn", Schedule: "pipemare-v", Placement: "balanced"}.Check()
	require.EqualError(t, err, "placement balanced: schedule pipemare-v places its stages on its workers by the schedule, not by their costs: give placement contiguous, round-robin or v")
	sch, err := runspec.Spec{Model: "cnn", Schedule: "zb-v", Placement: "contiguous"}.ScheduleNamed()
	require.NoError(t, err)
	require.Equal(t, schedule.VShape, sch.Place, "zb-v's placement is its own: Check refuses another")
}
