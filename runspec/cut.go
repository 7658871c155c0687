package runspec

import (
	"strconv"
	"strings"
)

// ParseCut reads a cut as Spec.Cut holds it: op positions from 1,
// comma-separated, increasing ("": none). An error is an *Error of the cut
// setting.
func ParseCut(list string) ([]int, error) {
	if list == "" {
		return nil, nil
	}
	var cut []int
	for _, f := range strings.Split(list, ",") {
		q, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || q < 1 || len(cut) > 0 && q <= cut[len(cut)-1] {
			return nil, errorf("cut", strconv.Quote(list), "increasing op positions from 1, comma-separated, like 22,81")
		}
		cut = append(cut, q)
	}
	return cut, nil
}

// FormatCut writes a cut as ParseCut reads it.
func FormatCut(cut []int) string {
	parts := make([]string, len(cut))
	for i, q := range cut {
		parts[i] = strconv.Itoa(q)
	}
	return strings.Join(parts, ",")
}
