package transport

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pkg/errors"
)

// Link is a pair of stages that exchange messages, in either direction.
// Every network transport's configuration lists a pipeline's links; the
// driver is linked to every stage without being listed.
type Link struct{ A, B Peer }

func (l Link) String() string { return fmt.Sprintf("%d-%d", l.A, l.B) }

// Sorted returns l with A < B.
func (l Link) Sorted() Link {
	if l.B < l.A {
		return Link{l.B, l.A}
	}
	return l
}

// CheckLinks returns the links of a pipeline of stages stages sorted, each
// with A < B, or an error naming a link that does not join two different
// stages of the pipeline, or one listed twice.
func CheckLinks(links []Link, stages int) ([]Link, error) {
	out := make([]Link, 0, len(links))
	for _, l := range links {
		s := l.Sorted()
		if s.A < 0 || int(s.B) >= stages || s.A == s.B {
			return nil, errors.Errorf("link %v: a link joins two different stages of 0..%d", l, stages-1)
		}
		if slices.Contains(out, s) {
			return nil, errors.Errorf("link %v is listed twice", l)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(x, y Link) int {
		if x.A != y.A {
			return int(x.A - y.A)
		}
		return int(x.B - y.B)
	})
	return out, nil
}

// PeersOf returns the peers self exchanges messages with in a pipeline of
// stages stages and the links links (CheckLinks'), split into those self
// dials and those that dial self: of two linked peers the lower one dials
// (the driver is the lowest and dials every stage).
func PeersOf(self Peer, stages int, links []Link) (dials, accepts []Peer) {
	linked := func(other Peer) bool {
		if self == Driver || other == Driver {
			return true
		}
		return slices.Contains(links, Link{self, other}.Sorted())
	}
	for p := Driver; p < Peer(stages); p++ {
		if p == self || !linked(p) {
			continue
		}
		if self < p {
			dials = append(dials, p)
		} else {
			accepts = append(accepts, p)
		}
	}
	return dials, accepts
}

// LinksString is links as "[0-1 1-2]".
func LinksString(links []Link) string {
	s := make([]string, len(links))
	for i, l := range links {
		s[i] = l.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}
