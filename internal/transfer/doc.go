// Package transfer moves conversations between machines. Export writes
// chosen conversations, with their fork ancestors, into one archive
// (package archive's container) with a manifest; it takes no lock, copying
// each log's committed prefix, so it runs beside the runtime. Stage
// verifies such an archive in a private staging directory inside the data
// directory; then, under runtime.lock, Import checks it against the store
// and the machine (id collisions, working directories, agents and models,
// fork sources) and moves conversation directories into place by rename.
// docs/TRANSFER.md is the reference.
package transfer
