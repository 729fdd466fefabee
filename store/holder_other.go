//go:build !linux

package store

import "time"

// processStart: only Linux says when a process started (/proc).
func processStart(int) (time.Time, bool) { return time.Time{}, false }

// lockPIDs: only Linux lists the holders of a lock (/proc/locks).
func lockPIDs(string) ([]int, bool) { return nil, false }
