//go:build !unix

package machine

import "errors"

func mkfifo(string) error { return errors.New("no FIFOs here") }
