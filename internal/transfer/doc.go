// Package transfer moves conversations between machines: Export writes
// chosen conversations, with their fork ancestors, into one archive (the
// container of package archive, shared with backup) with a manifest;
// Import verifies such an archive, checks it against the store and the
// machine (id collisions, working directories, agents and models, fork
// sources), and places the conversations into the store.
//
// Export takes no lock: it copies each log's committed prefix, so it runs
// beside the runtime. Import verifies the whole archive in a private
// staging directory inside the data directory before it looks at the
// store, then takes runtime.lock, checks, and moves conversation
// directories into place by rename. docs/TRANSFER.md is the reference.
//
// Library code takes its streams, clock and temporary directory from the
// caller; it never writes to os.Stdout.
package transfer
