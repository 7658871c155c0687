package transport

import (
	"bytes"
	"encoding/gob"

	"github.com/pkg/errors"
)

// EncodeBody gob-encodes a message's Body for a transport that carries it
// between processes (nil: no bytes). Its error names the body's type and
// says to register it with gob.Register: a transport calls it in Send, so
// that the sender learns of it.
func EncodeBody(body any) ([]byte, error) {
	if body == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&body); err != nil {
		return nil, errors.Wrapf(err, "encoding the body (%T; is it registered with gob.Register?)", body)
	}
	return buf.Bytes(), nil
}

// DecodeBody decodes what EncodeBody encoded (no bytes: nil).
func DecodeBody(b []byte) (any, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var body any
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&body); err != nil {
		return nil, errors.Wrap(err, "decoding the body (is its type registered with gob.Register here too?)")
	}
	return body, nil
}

// PeerList names peers for a message: "driver, stage 1", or "no peer".
func PeerList(ps []Peer) string {
	if len(ps) == 0 {
		return "no peer"
	}
	var b bytes.Buffer
	for i, p := range ps {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}
