package runspec

import "encoding/json"

// DecodeRenamed decodes the JSON object b into v as json.Unmarshal does,
// reading a key a record once had under its old name (renamed: old →
// new) as the new one when b does not also hold the new one: how a record
// whose keys were renamed to the specification's still reads the files
// written before (settings.json, a checkpoint's configuration).
func DecodeRenamed(b []byte, v any, renamed map[string]string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	changed := false
	for old, now := range renamed {
		if val, ok := m[old]; ok {
			if _, both := m[now]; !both {
				m[now] = val
			}
			delete(m, old)
			changed = true
		}
	}
	if changed {
		var err error
		if b, err = json.Marshal(m); err != nil {
			return err
		}
	}
	return json.Unmarshal(b, v)
}
