package main

// The index package will import the SQLite driver for metadata.db; until it
// does, this keeps the module requirement (and go.sum) stable under go mod
// tidy.
import _ "modernc.org/sqlite"
