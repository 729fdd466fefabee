// Package contract holds what every JSON document of convkit's libraries
// and commands shares: the version of that contract (docs/JSON.md). The
// libraries stamp their result structs with it and the command line prints
// them, so the version is written in one place.
package contract

// Version is the schemaVersion of every JSON document convkit writes but
// migrate's summary (migrate.SummaryVersion). It changes only when a field
// is removed or changes meaning; new fields do not change it. 2: per-item
// results share one shape ({id, path, reason}).
const Version = 2
