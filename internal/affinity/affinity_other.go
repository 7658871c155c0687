//go:build !linux

package affinity

// Allowed is not supported here.
func Allowed() ([]int, error) { return nil, ErrUnsupported }

// PinThread is not supported here.
func PinThread([]int) error { return ErrUnsupported }

// PinProcess is not supported here.
func PinProcess([]int) error { return ErrUnsupported }
