package transfer

import (
	"fmt"
	"io"
	"runtime"

	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/store"
)

func cpus() int { return runtime.NumCPU() }

// Import stages the archive in the data directory (archive.Staging: the
// directory, its lock and the sweep of those killed imports left are the
// archive package's):
//
//	<data-dir>/.conversations.import-<random>.lock.tmp   flocked while the import runs
//	<data-dir>/.conversations.import-<random>.tmp/
//	└── tree/   the archive, extracted: MANIFEST.json, conversations/…
//
// It is on the store's file system, so conversation directories move
// from tree/conversations/ into the store by rename. An import makes it
// before it takes runtime.lock (it verifies first), so a staging
// directory without a lock (an earlier build's, killed before it locked
// it) is taken for a killed import's only when an hour old.
var stagingName = "." + store.ConversationsDirName + ".import"

func newStaging(dataDir string) (*archive.Staging, error) {
	return archive.NewStaging(dataDir, stagingName)
}

// removeStaleStaging removes the staging directories of imports that are
// no longer running (killed): their lock is free. The caller holds
// runtime.lock.
func removeStaleStaging(dataDir string, own *archive.Staging, log io.Writer) {
	for _, s := range archive.SweepStaging(dataDir, stagingName, own, archive.UnlockedStagingAge) {
		if s.Err != nil {
			fmt.Fprintf(log, "convkit: could not remove %s: %v\n", s.Path, s.Err)
		} else {
			fmt.Fprintf(log, "convkit: removed %s, left by an interrupted import\n", s.Path)
		}
	}
}
