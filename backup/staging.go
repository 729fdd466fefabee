package backup

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/store"
)

// Where a restore stages the archive (archive.Staging: the directory, its
// lock and the sweep of those killed processes left are the archive
// package's):
//
//   - a whole restore, beside the target: .<target name>.restore-<random>.tmp,
//     whose tree becomes the target by rename;
//   - a single conversation's restore into an existing store, inside it:
//     <target>/.restore-<random>.tmp, on the store's file system even when
//     the data directory is a mount point (the store's walk ignores it).
//
// Each restore first removes what killed restores into the same target
// left. A staging directory without a lock is an earlier build's, whose
// restore died between making it and locking it, or is about to lock it:
// beside the target it goes only when an hour old; inside the store only a
// restore holding runtime.lock makes one, so under runtime.lock every
// unlocked one is a killed restore's.
const intoStagingName = ".restore"

func wholeStagingName(target string) string { return "." + filepath.Base(target) + ".restore" }

// newWholeStaging makes the staging directory of a whole restore into
// target and removes those of killed restores into it.
func newWholeStaging(target string, log io.Writer) (*archive.Staging, error) {
	parent := filepath.Dir(target)
	stage, err := archive.NewStaging(parent, wholeStagingName(target))
	if err != nil {
		return nil, err
	}
	logSwept(log, archive.SweepStaging(parent, wholeStagingName(target), stage, archive.UnlockedStagingAge))
	return stage, nil
}

// sweepWhole removes what killed whole restores into target left beside it.
func sweepWhole(target string, log io.Writer) {
	logSwept(log, archive.SweepStaging(filepath.Dir(target), wholeStagingName(target), nil, archive.UnlockedStagingAge))
}

// newIntoStaging makes the staging directory of a restore into the store
// at target, whose runtime.lock the caller holds, after removing those of
// killed restores: each removed is an ItemTempRemoved, each that could
// not be a note on log.
func newIntoStaging(target string, onEvent func(store.Item), log io.Writer) (*archive.Staging, error) {
	for _, s := range archive.SweepStaging(target, intoStagingName, nil, 0) {
		if s.Err != nil {
			logSwept(log, []archive.Swept{s})
		} else {
			onEvent(store.Item{Kind: store.ItemTempRemoved, Path: s.Path, Reason: leftByRestore})
		}
	}
	return archive.NewStaging(target, intoStagingName)
}

// leftByRestore says whose a staging directory removed was.
const leftByRestore = "left by an interrupted restore"

func logSwept(log io.Writer, swept []archive.Swept) {
	for _, s := range swept {
		if s.Err != nil {
			fmt.Fprintf(log, "could not remove %s: %v\n", s.Path, s.Err)
		} else {
			fmt.Fprintf(log, "REMOVED %s: %s\n", s.Path, leftByRestore)
		}
	}
}
