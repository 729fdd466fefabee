// Package store owns the convkit data directory: where it is, its layout and
// the names in it, runtime.lock, and the conversation log. The runtime server,
// every convkit command, fixtures and tests get at a store through Open, the
// one place runtime.lock is taken, and read and write it through the Store
// handle it returns; a directory that is not a store is refused unless the
// caller asks Open to create one.
package store
