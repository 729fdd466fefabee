package backup

import (
	"errors"
	"fmt"
	"strings"

	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// manifestFormat's Version changes only when a field changes meaning or
// goes away; MaxBytes bounds a manifest to about two million files.
var manifestFormat = archive.ManifestFormat{Name: "convkit-backup", Version: 1, Kind: "backup", MaxBytes: 1 << 30}

// How logs were checked at backup time (Manifest.LogCheck).
const (
	LogCheckStructure = "structure"
	LogCheckStrict    = "strict"
)

// States of the metadata.db snapshot.
const (
	IndexSnapshot   = "snapshot"   // archived as metadata.db (VACUUM INTO)
	IndexAbsent     = "absent"     // the store had no metadata.db
	IndexUnreadable = "unreadable" // it could not be read; see Problems
	IndexLeftOut    = "left-out"   // left out on request (Options.NoIndex)
)

// Manifest describes an archive: the MANIFEST.json entry, written last.
type Manifest struct {
	archive.ManifestHeader
	// LockError says why the lock could not be taken though nobody held it
	// (a read-only data directory): the backup then ran online.
	LockError     string `json:"lockError,omitempty"`
	LiveTailBytes int64  `json:"liveTailBytes"` // past the committed prefixes, left out
	// LogCheck is how session logs were checked; conversation logs are
	// always read strictly.
	LogCheck      string         `json:"logCheck"`
	Index         string         `json:"index"`
	IndexMethod   string         `json:"indexMethod,omitempty"` // IndexByVacuum or IndexByCopy
	Counts        Counts         `json:"counts"`
	Conversations []Conversation `json:"conversations"`
	Files         []File         `json:"files"`    // in archive order, the manifest aside
	Problems      []store.Item   `json:"problems"` // files of the store left out
}

// Counts sum up an archive; SessionLogs counts current ones. The second
// group, set when every log was read strictly, is what a rebuilt index holds.
type Counts struct {
	Files         int   `json:"files"`
	Logs          int   `json:"logs"`
	Bytes         int64 `json:"bytes"`
	Conversations int   `json:"conversations"`
	SessionLogs   int   `json:"sessionLogs"`
	InvalidLogs   int   `json:"invalidLogs"`

	Indexed         int   `json:"indexed"`
	Skipped         int   `json:"skipped"`
	Deleting        int   `json:"deleting"`
	IndexedSessions int   `json:"indexedSessions"`
	Events          int64 `json:"events"`
}

// Conversation is one archived conversation directory.
type Conversation struct {
	ID  string `json:"id"`
	Dir string `json:"dir"`
	// Strict backups only: what a reindex does with it (reindex.Accept),
	// and the conversations it reads older history from.
	Expect    store.ItemKind `json:"expect,omitempty"`
	Reason    string         `json:"reason,omitempty"`
	DependsOn []string       `json:"dependsOn,omitempty"`
}

// File is one archived file.
type File struct {
	Name   string `json:"name"` // metadata.db or conversations/<dir>/<log>
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Log    *Log   `json:"log,omitempty"`
}

// Log is what the strict reader found of the archived bytes, and of them
// only, so a backup of a restored store repeats it.
type Log struct {
	Session   string `json:"-"`         // "" for the conversation log; set as it is read
	Current   bool   `json:"current"`   // the highest archived generation
	Committed int64  `json:"committed"` // 0 when Error is set
	TornTail  bool   `json:"tornTail"`
	Strict    bool   `json:"strict"` // every event read as reindex reads it
	Events    int64  `json:"events"`
	// Error is why the structure check or the strict read failed: the log
	// is archived whole.
	Error    string `json:"error,omitempty"`
	err      error  // the error Error states (set as a log is read)
	ruleOnly bool   // only convlog's admission failed
}

func (g *Log) fail(err error) { g.Error, g.err = err.Error(), err }

func (m *Manifest) Listing() []archive.Listed {
	return archive.ListFiles(m.Files, func(f *File) archive.Listed { return archive.Listed{Name: f.Name, Size: f.Size, SHA256: f.SHA256} })
}

func (m *Manifest) resolve(name string) error {
	if m.Files == nil {
		return errors.New(name + ": the manifest lists no files")
	}
	for _, f := range m.Files {
		if f.Log != nil && strings.Count(f.Name, "/") != 2 {
			return fmt.Errorf("%s: log %s is not conversations/<dir>/<log>", name, termtext.Quote(f.Name))
		}
	}
	return nil
}
