package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/convkit/convkit/internal/durable"
)

// A rerun of a killed multi-conversation delete must tell the conversations it
// removed ("already deleted") from ids never in the store, but a removed
// directory leaves no trace, so DeleteAll first publishes a journal,
// <data-dir>/.delete-<16 hex>.journal, naming every conversation it deletes.
// Journals are kept for JournalAge and at most MaxJournals of them.

const (
	journalPrefix = ".delete-"
	journalSuffix = ".journal"
	// maxJournalBytes bounds the read of a journal: it names the ids of
	// one command line.
	maxJournalBytes = 16 << 20
)

// How long, and how many, delete journals are kept.
const (
	JournalAge  = 30 * 24 * time.Hour
	MaxJournals = 256
)

// deleteJournal is a journal's content.
type deleteJournal struct {
	IDs []string `json:"ids"`
}

// journalFile is a journal found in the data directory.
type journalFile struct {
	path  string
	ids   []string // nil when unreadable (a kill while it was written: no deletion had begun)
	mtime time.Time
}

// isJournalName reports a name DeleteAll gives its journals.
func isJournalName(name string) bool {
	hexPart, ok := strings.CutPrefix(name, journalPrefix)
	if !ok {
		return false
	}
	hexPart, ok = strings.CutSuffix(hexPart, journalSuffix)
	if !ok || len(hexPart) != 16 {
		return false
	}
	_, err := hex.DecodeString(hexPart)
	return err == nil
}

// deleteJournals lists the journals killed deletes left in the data
// directory. Entries that are not regular files are not journals (links are
// never followed) and are left alone.
func (s *Store) deleteJournals() ([]journalFile, error) {
	ents, err := os.ReadDir(s.dataDir)
	if err != nil {
		return nil, err
	}
	var out []journalFile
	for _, e := range ents {
		if !isJournalName(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		j := journalFile{path: filepath.Join(s.dataDir, e.Name())}
		f, err := durable.OpenRegular(j.path, os.O_RDONLY)
		if err != nil {
			continue
		}
		if fi, err := f.Stat(); err == nil {
			j.mtime = fi.ModTime()
		}
		b, err := io.ReadAll(io.LimitReader(f, maxJournalBytes+1))
		f.Close()
		if err == nil && len(b) <= maxJournalBytes {
			j.ids = parseJournal(b)
		}
		out = append(out, j)
	}
	return out, nil
}

// parseJournal reads a journal's ids, or nil when b is not a journal
// (one that a kill cut short, or anything else).
func parseJournal(b []byte) []string {
	var dj deleteJournal
	if json.Unmarshal(bytes.TrimSpace(b), &dj) != nil {
		return nil
	}
	ids := []string{}
	for _, id := range dj.IDs {
		// Only ids a store can hold were written.
		if _, err := EncodeSegment(id); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// writeDeleteJournal publishes a journal naming ids: a new file, written,
// fsynced, and its directory fsynced, before any of them is touched.
func (s *Store) writeDeleteJournal(ctx context.Context, ids []string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	path := filepath.Join(s.dataDir, journalPrefix+hex.EncodeToString(r[:])+journalSuffix)
	b, err := json.Marshal(deleteJournal{IDs: ids})
	if err != nil {
		return "", err
	}
	f, err := durable.CreateExcl(path)
	if err != nil {
		return "", fmt.Errorf("the delete journal: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = durable.SyncDir(s.dataDir)
	}
	if err != nil {
		os.Remove(path)
		return "", fmt.Errorf("write the delete journal %s: %w", path, err)
	}
	return path, nil
}

// expiredJournals are the journals to remove once a delete has finished:
// those that do not read (a kill while one was written, before anything
// was deleted), those older than JournalAge, and the oldest beyond
// MaxJournals (keep is this run's own, never removed).
func (s *Store) expiredJournals(all []journalFile, keep string) []string {
	var out []string
	var kept []journalFile
	// Ages are of file modification times: the system's clock, not the
	// store's.
	cutoff := time.Now().Add(-JournalAge)
	for _, j := range all {
		switch {
		case j.path == keep:
		case j.ids == nil, j.mtime.Before(cutoff):
			out = append(out, j.path)
		default:
			kept = append(kept, j)
		}
	}
	sort.Slice(kept, func(i, k int) bool { return kept[i].mtime.After(kept[k].mtime) })
	for i, j := range kept {
		if i+1 >= MaxJournals { // this run's counts as one
			out = append(out, j.path)
		}
	}
	return out
}

// removeJournals removes the journals at paths, then fsyncs the data
// directory.
func (s *Store) removeJournals(paths []string) error {
	var errs []error
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(paths) > 0 {
		errs = append(errs, durable.SyncDir(s.dataDir))
	}
	return errors.Join(errs...)
}
