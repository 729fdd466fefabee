package backup

import (
	"errors"
	"fmt"
	"strings"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// The manifest's identity. FormatVersion changes only when a field changes
// meaning or goes away; readers ignore fields they do not know.
const (
	FormatName    = "convkit-backup"
	FormatVersion = 1
	ToolName      = archive.ToolName
)

// manifestFormat is the backup's manifest for the archive package, which
// writes, reads and checks it. A backup lists every file of a store: the
// bound allows about two million.
var manifestFormat = archive.ManifestFormat{Name: FormatName, Version: FormatVersion, Kind: "backup", MaxBytes: 1 << 30}

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
	// The header; Online means another process held runtime.lock (Holder),
	// so each log was copied up to its committed prefix, not whole.
	archive.ManifestHeader
	// LockError says why the lock could not be taken when it was not held
	// by another process (a read-only data directory, ...): the backup then
	// ran online.
	LockError string `json:"lockError,omitempty"`
	// LiveTailBytes are the bytes past the logs' committed prefixes left
	// out of an online backup (appends in flight, torn tails).
	LiveTailBytes int64 `json:"liveTailBytes"`
	// LogCheck is how session logs were checked: LogCheckStructure
	// (lines and frames: the committed prefix) or LogCheckStrict (every
	// event, as reindex reads it). Conversation logs are always read
	// strictly.
	LogCheck string `json:"logCheck"`
	// Index is the state of the metadata.db snapshot; IndexMethod how it
	// was taken: IndexByVacuum (SQLite's VACUUM INTO, one read
	// transaction; always online) or IndexByCopy (the file itself, offline:
	// with runtime.lock held nothing writes it, and no write-ahead log or
	// journal was pending).
	Index         string         `json:"index"`
	IndexMethod   string         `json:"indexMethod,omitempty"`
	Counts        Counts         `json:"counts"`
	Conversations []Conversation `json:"conversations"`
	// Files are the entries in archive order (the manifest aside).
	Files []File `json:"files"`
	// Problems are files of the store that are not in the archive, or
	// entries that could not be made.
	Problems []store.Item `json:"problems"`
}

// Counts sum up an archive. SessionLogs counts the current session logs
// (one per session: the highest archived generation). InvalidLogs failed
// their check and are archived whole. The rest are set only when every
// log was read strictly (LogCheck strict): the conversations'
// expectations, and the session logs and events of the conversations
// expected to be indexed, which is what an index rebuilt from the archive
// must hold.
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
	// Expect (strict backups only) is what a reindex of the archived
	// logs does with it (reindex.Accept); Reason says why it skips.
	Expect reindex.Outcome `json:"expect,omitempty"`
	Reason string          `json:"reason,omitempty"`
	// DependsOn (strict backups only) are the conversations it reads older
	// history from (fork after compaction): they travel with it on a
	// single restore.
	DependsOn []string `json:"dependsOn,omitempty"`
}

// File is one archived file.
type File struct {
	// Name is the entry name: metadata.db or conversations/<dir>/<log>.
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Log is set for logs.
	Log *Log `json:"log,omitempty"`
}

// Log describes an archived log as the strict reader found the archived
// bytes. Every field depends only on those bytes, so a backup of a
// restored store repeats it.
type Log struct {
	// Conversation and Session (the session id, "" for the conversation
	// log) are not stored: the entry name says them.
	Conversation string `json:"-"`
	Session      string `json:"-"`
	// Current: the highest archived generation of its log, the one every
	// reader uses.
	Current bool `json:"current"`
	// Committed is the length of the committed prefix, found from the
	// structure (after the last complete line, before a torn final frame):
	// Size unless the archived bytes end in a torn tail; 0 when Error is set.
	Committed int64 `json:"committed"`
	TornTail  bool  `json:"tornTail"`
	// Strict: every event was read as reindex reads it (conversation logs
	// always, session logs with backup --strict). Events counts them; it is
	// 0 when Strict is false.
	Strict bool  `json:"strict"`
	Events int64 `json:"events"`
	// Error is why the structure check, or the strict read, failed: the
	// log is archived whole.
	Error string `json:"error,omitempty"`
	// err is the error Error states, when this build found it;
	// ruleOnly: a rule of the format beyond the lines (convlog's
	// admission) is all that failed.
	err      error
	ruleOnly bool
}

// fail records err as the log's Error.
func (g *Log) fail(err error) { g.Error, g.err = err.Error(), err }

// failure is the error Error states, or nil.
func (g *Log) failure() error {
	switch {
	case g.Error == "":
		return nil
	case g.err != nil:
		return g.err
	}
	return errors.New(g.Error)
}

// Listing is every file the manifest lists (the manifest aside).
func (m *Manifest) Listing() []archive.Listed {
	return archive.ListFiles(m.Files, func(f *File) archive.Listed { return archive.Listed{Name: f.Name, Size: f.Size, SHA256: f.SHA256} })
}

// ReadManifest reads and checks a manifest file (never through a symbolic
// link).
func ReadManifest(path string) (*Manifest, error) {
	var m Manifest
	if err := manifestFormat.ReadFile(path, &m); err != nil {
		return nil, err
	}
	if err := m.resolve(path); err != nil {
		return nil, err
	}
	return &m, nil
}

// resolve checks what the archive package does not know of and derives
// each log's conversation and session from its entry name.
func (m *Manifest) resolve(name string) error {
	if m.Files == nil {
		return errors.New(name + ": the manifest lists no files")
	}
	for i := range m.Files {
		f := &m.Files[i]
		if f.Log == nil {
			continue
		}
		parts := strings.Split(f.Name, "/")
		if len(parts) != 3 {
			return fmt.Errorf("%s: log %s is not conversations/<dir>/<log>", name, termtext.Quote(f.Name))
		}
		f.Log.Conversation, _ = store.DecodeSegment(parts[1])
		if n, ok := convlog.ParseName(parts[2]); ok && n.Base != store.ConversationLogBase {
			f.Log.Session, _ = store.DecodeBase(n.Base)
		}
	}
	return nil
}
