package affinity

import (
	"strconv"
	"strings"

	"github.com/pkg/errors"
)

// ErrUnsupported is returned where the system has no CPU affinity this
// package can set.
var ErrUnsupported = errors.New("affinity: CPU pinning is supported on Linux only")

// Parse reads a CPU list as taskset and /proc write them: "3", "0,2",
// "0-3,8". It returns the CPUs in increasing order, each once.
func Parse(list string) ([]int, error) {
	seen := map[int]bool{}
	var cpus []int
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a {
			return nil, errors.Errorf("affinity: %q is not a CPU list (like 1, 0-3 or 0,2)", list)
		}
		for c := a; c <= b; c++ {
			if !seen[c] {
				seen[c] = true
				cpus = append(cpus, c)
			}
		}
	}
	sortInts(cpus)
	return cpus, nil
}

// Format writes cpus as a CPU list, ranges folded: [0 1 2 5] is "0-2,5".
func Format(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}
