package runspec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
)

// Difference is one setting whose value differs between two records of a
// run: Then (the recorded one) and Now, as JSON text ("default" for a
// setting one of them leaves out).
type Difference struct {
	Setting, Then, Now string
}

// Diff lists the settings whose values differ between then and now, in
// then's field order, then those only now has: the one comparison of a
// run's records (Spec, and any struct with JSON tags such as a
// checkpoint's configuration). Nil when they agree.
func Diff(then, now any) []Difference {
	a, b := fields(then), fields(now)
	bv := make(map[string]string, len(b))
	for _, kv := range b {
		bv[kv.Name] = kv.Value
	}
	var out []Difference
	for _, kv := range a {
		if v := bv[kv.Name]; v != kv.Value {
			out = append(out, Difference{Setting: kv.Name, Then: kv.Value, Now: v})
		}
		delete(bv, kv.Name)
	}
	for _, kv := range b {
		if _, only := bv[kv.Name]; only {
			out = append(out, Difference{Setting: kv.Name, Then: unset, Now: kv.Value})
		}
	}
	return out
}

// nameValue is one field of a record.
type nameValue struct{ Name, Value string }

// fields are v's JSON fields in order, each value as JSON text (a string
// unquoted); for a struct, every tagged field, one its JSON form leaves
// out as its zero value, or "default" for a nil pointer.
func fields(v any) []nameValue {
	b, _ := json.Marshal(v)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	var out []nameValue
	for _, k := range keys(v, b) {
		val, ok := m[k]
		if !ok {
			val, ok = zero(v, k)
		}
		out = append(out, nameValue{k, text(val, ok)})
	}
	return out
}

// zero is the JSON of the zero value of struct v's field with JSON key
// key; not ok for a pointer (or no such field).
func zero(v any, key string) (json.RawMessage, bool) {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Struct {
		return nil, false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == key && f.Type.Kind() != reflect.Pointer {
			b, err := json.Marshal(reflect.Zero(f.Type).Interface())
			return b, err == nil
		}
	}
	return nil, false
}

// keys are the JSON keys of v: its struct's tags in field order, or the
// keys of its JSON form b in order.
func keys(v any, b []byte) []string {
	t := reflect.TypeOf(v)
	if t != nil && t.Kind() == reflect.Struct {
		var out []string
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			if name != "" && name != "-" {
				out = append(out, name)
			}
		}
		return out
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var out []string
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		out = append(out, tok.(string))
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return out
		}
	}
	return out
}

// text is a JSON value as a message writes it: a string unquoted (but
// the empty one, ""), an absent value "default".
func text(raw json.RawMessage, ok bool) string {
	if !ok || string(raw) == "null" {
		return unset
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return `""`
		}
		return s
	}
	return string(raw)
}

// DiffError is a record of a run (a checkpoint's, settings.json) that
// differs from the run about to continue it. Its message is Before, the
// differences ("lr 0.03 there, 0.05 here; …") and After; Before and After
// may name settings as {name}, as Error's Reason does.
type DiffError struct {
	Before      string
	Differences []Difference
	After       string
}

func (e *DiffError) Error() string { return e.Words(bare) }

// Words is the message with each setting worded by word: a difference as
// "-lr (lr) 0.03 there, 0.05 here" when word renames lr to -lr.
func (e *DiffError) Words(word func(setting string) string) string {
	parts := make([]string, len(e.Differences))
	for i, d := range e.Differences {
		name := d.Setting
		if w := word(name); w != name {
			name = w + " (" + name + ")"
		}
		parts[i] = name + " " + d.Then + " there, " + d.Now + " here"
	}
	return wordSettings(e.Before, word) + strings.Join(parts, "; ") + wordSettings(e.After, word)
}
