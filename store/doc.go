// Package store owns the convkit data directory: where it is, its layout and
// the names in it, runtime.lock, and the conversation log. The runtime server
// and every convkit command open the store through this package, so the
// layout and the lock exist in one place.
package store
