package reach

import (
	"reflect"
	"unsafe"

	"github.com/pkg/errors"
)

// Field returns the field name of x (a struct, or a pointer to one),
// readable although it is unexported. It fails behind the version gate,
// and for a field x does not have.
func Field(x any, name string) (reflect.Value, error) {
	if err := Check(); err != nil {
		return reflect.Value{}, err
	}
	return field(reflect.ValueOf(x), name)
}

func field(v reflect.Value, name string) (reflect.Value, error) {
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return reflect.Value{}, errors.Errorf("%v is not a struct", v.Type())
	}
	if !v.CanAddr() {
		c := reflect.New(v.Type()).Elem()
		c.Set(v)
		v = c
	}
	f := v.FieldByName(name)
	if !f.IsValid() {
		return reflect.Value{}, errors.Errorf("%v has no field %s", v.Type(), name)
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), nil
}

// Int reads x's integer field name.
func Int(x any, name string) (int, error) {
	f, err := Field(x, name)
	if err != nil {
		return 0, err
	}
	return intOf(f, name)
}

func intOf(f reflect.Value, name string) (int, error) {
	switch f.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return int(f.Int()), nil
	}
	return 0, errors.Errorf("field %s is %v, not an integer", name, f.Type())
}

// Bool reads x's boolean field name.
func Bool(x any, name string) (bool, error) {
	f, err := Field(x, name)
	if err != nil {
		return false, err
	}
	if f.Kind() != reflect.Bool {
		return false, errors.Errorf("field %s is %v, not a bool", name, f.Type())
	}
	return f.Bool(), nil
}

// Float reads x's floating-point field name.
func Float(x any, name string) (float64, error) {
	f, err := Field(x, name)
	if err != nil {
		return 0, err
	}
	if f.Kind() != reflect.Float64 && f.Kind() != reflect.Float32 {
		return 0, errors.Errorf("field %s is %v, not a float", name, f.Type())
	}
	return f.Float(), nil
}

// Ints reads x's field name, a slice or array of integers (a shape, a
// pattern).
func Ints(x any, name string) ([]int, error) {
	f, err := Field(x, name)
	if err != nil {
		return nil, err
	}
	if f.Kind() != reflect.Slice && f.Kind() != reflect.Array {
		return nil, errors.Errorf("field %s is %v, not a list", name, f.Type())
	}
	out := make([]int, f.Len())
	for i := range out {
		if out[i], err = intOf(f.Index(i), name); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TypeName is the name of x's type, without the pointer: "reshapeOp" for
// a Gorgonia reshape op, "" for nil.
func TypeName(x any) string {
	t := reflect.TypeOf(x)
	if t == nil {
		return ""
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// TypeString is x's type as Go prints it: "gorgonia.linAlgBinOp",
// "*gorgonia.BatchNormOp"; "" for nil.
func TypeString(x any) string {
	t := reflect.TypeOf(x)
	if t == nil {
		return ""
	}
	return t.String()
}

// FromGorgonia reports whether x's type (or what it points to) is defined
// in package gorgonia.
func FromGorgonia(x any) bool {
	t := reflect.TypeOf(x)
	if t == nil {
		return false
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath() == "gorgonia.org/gorgonia"
}
