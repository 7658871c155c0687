package experiment

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseVariant: a variant's text form reads back as itself, its
// parameters in their fixed order; wrong forms are refused, saying why.
func TestParseVariant(t *testing.T) {
	v, err := ParseVariant(" spike(decay=step, t1=0.5,warmup=0.05) ")
	require.NoError(t, err)
	require.Equal(t, "spike(warmup=0.05,t1=0.5,decay=step)", v.String(), "the fixed order")
	require.Equal(t, 0.05, *v.Warmup)
	require.Equal(t, 0.5, *v.T1)
	require.Nil(t, v.T2)
	require.Equal(t, "spike_warmup=0.05_t1=0.5_decay=step", v.key())
	again, err := ParseVariant(v.String())
	require.NoError(t, err)
	require.Equal(t, v, again)
	plain, err := ParseVariant("naive")
	require.NoError(t, err)
	require.Equal(t, "naive", plain.String())
	for s, msg := range map[string]string{
		"hogwild":                      `no method "hogwild"`,
		"spike(gamma=0.9)":             `no parameter "gamma"`,
		"spike(t1=0.5,t1=0.2)":         "t1 given twice",
		"spike(warmup=1)":              "warmup=1: a number in [0, 1)",
		"spike(lr=0)":                  "lr=0: a number in (0, 10]",
		"spike(t2=x)":                  "t2=x: a number in [0, 1)",
		"spike(decay=exp)":             "decay=exp: one of cosine, step, constant",
		"spike(decay=step,decay=step)": "decay given twice",
		"spike(t1=0.5":                 "one closing parenthesis at the end",
		"spike(t1=(0.5))":              "one closing parenthesis at the end",
	} {
		_, err := ParseVariant(s)
		require.ErrorContains(t, err, msg, s)
	}
}

func TestSplitList(t *testing.T) {
	require.Equal(t, []string{"sequential", "spike(warmup=0.1,t1=0.5)", "pipemare"}, SplitList("sequential, spike(warmup=0.1,t1=0.5),,pipemare,"))
	require.Empty(t, SplitList(" , "))
}
