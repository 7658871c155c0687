// Package jsonkeys checks the keys of decoded JSON documents, for the
// tests of the packages whose outputs programs read (asyncvm's Report,
// pipemare's report.json).
package jsonkeys

import (
	"regexp"
	"sort"
	"strconv"
)

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// NotSnakeCase returns the paths (".a.b[].c") of the keys of doc, a value
// decoded by encoding/json into any, that are not snake_case, sorted.
// Integer keys (histograms: a delay → a count) are allowed.
func NotSnakeCase(doc any) []string {
	var bad []string
	walk(doc, "", &bad)
	sort.Strings(bad)
	return bad
}

func walk(v any, path string, bad *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if _, err := strconv.Atoi(k); err != nil && !snakeCase.MatchString(k) {
				*bad = append(*bad, path+"."+k)
			}
			walk(x, path+"."+k, bad)
		}
	case []any:
		for _, x := range v {
			walk(x, path+"[]", bad)
		}
	}
}
