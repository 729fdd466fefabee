//go:build !unix

package store

import "errors"

func mkfifo(string) error { return errors.New("no FIFOs here") }
