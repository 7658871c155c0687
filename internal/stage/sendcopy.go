package stage

import (
	"context"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"

	"github.com/pipemare/pipemare/internal/recycle"
	"github.com/pipemare/pipemare/transport"
)

// sendCopy sends m, whose values are the borrowed results of a program's
// run: through the endpoint's SendCopy where it copies them on their way
// (transport.Copier), else as copies the receiver owns (Own).
func sendCopy(ctx context.Context, ep transport.Endpoint, m transport.Message) error {
	if c, ok := ep.(transport.Copier); ok {
		if sent, err := c.SendCopy(ctx, m); sent || err != nil {
			return err
		}
	}
	vals := make([]gorgonia.Value, len(m.Values))
	for i, v := range m.Values {
		c, err := recycle.Copy(v)
		if err != nil {
			for _, x := range vals[:i] {
				recycle.Put(x)
			}
			return errors.Wrapf(err, "sending %v", m)
		}
		vals[i] = c
	}
	m.Values, m.Own = vals, true
	return ep.Send(ctx, m)
}
