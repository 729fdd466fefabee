package transfer

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/convkit/convkit/store"
)

// The manifest's identity. FormatVersion changes only when a field changes
// meaning or goes away; readers ignore fields they do not know.
const (
	FormatName    = "convkit-export"
	FormatVersion = 1
	ToolName      = "convkit"
)

// Manifest describes an export archive: its MANIFEST.json entry, written
// last (docs/TRANSFER.md).
type Manifest struct {
	Format        string `json:"format"`
	FormatVersion int    `json:"formatVersion"`
	Tool          string `json:"tool"`
	ToolVersion   string `json:"toolVersion"`
	// LogFormatVersion is the log format version the exporting tool writes.
	LogFormatVersion int `json:"logFormatVersion"`
	// CreatedAt is when the export started (UTC, whole seconds); every
	// entry carries it as its modification time.
	CreatedAt time.Time `json:"createdAt"`
	// Online: runtime.lock was held by another process (Holder) while the
	// export ran. Export never takes the lock: it always copies each log's
	// committed prefix, so the archive is consistent either way.
	Online bool          `json:"online"`
	Holder *store.Holder `json:"holder"`
	// Requested are the ids named on the command line, as given.
	Requested []string `json:"requested"`
	// Conversations are the exported conversations in archive order (fork
	// ancestors before the conversations that read from them).
	Conversations []Conversation `json:"conversations"`
	// Files are the log entries in archive order (the manifest aside).
	Files []File `json:"files"`
	// Problems are what could not be exported: unreadable logs (their
	// conversation is left out whole), missing fork ancestors.
	Problems []Problem `json:"problems"`
}

// Conversation is one exported conversation, as its conversation log's
// committed prefix replays.
type Conversation struct {
	ID string `json:"id"`
	// Dir is its directory name: store.EncodeSegment(ID).
	Dir   string `json:"dir"`
	Title string `json:"title"`
	// Cwd is the working directory (absolute, from the source machine).
	Cwd    string   `json:"cwd"`
	Agents []string `json:"agents"`
	Models []string `json:"models"`
	// ForkedFrom is the fork (or rewind) source, "" for none.
	ForkedFrom      string `json:"forkedFrom"`
	AfterCompaction bool   `json:"afterCompaction"`
	// DependsOn are the conversations it reads older history from
	// (store.Dependencies); each travels in the same archive.
	DependsOn []string `json:"dependsOn"`
	Archived  bool     `json:"archived"`
	// Requested: named by the user. Otherwise it was added as a fork
	// ancestor of the conversations in AncestorOf.
	Requested  bool     `json:"requested"`
	AncestorOf []string `json:"ancestorOf"`
	// Sessions counts its sessions (root and subagents).
	Sessions int `json:"sessions"`
}

// File is one archived log: the current (highest) generation of one log,
// cut at its committed prefix.
type File struct {
	// Name is the entry name: conversations/<dir>/<log file name>.
	Name string `json:"name"`
	// Conversation is the conversation id; Session the session id, "" for
	// the conversation's own log.
	Conversation string `json:"conversation"`
	Session      string `json:"session,omitempty"`
	// Version is the log's format version.
	Version int    `json:"version"`
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256"`
	// Committed is the length of the committed prefix of the archived
	// bytes: always Size, since only the committed prefix is archived.
	Committed int64 `json:"committed"`
	// Events counts the events in the archived bytes.
	Events int64 `json:"events"`
	// LeftOut are the bytes past the committed prefix that the source file
	// held when it was read (a torn tail, or an append in flight).
	LeftOut int64 `json:"leftOut"`
}

// Problem is something of the source store that could not be exported.
type Problem struct {
	// ID is the conversation concerned, when known.
	ID     string `json:"id,omitempty"`
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// maxManifestBytes bounds the manifest an import accepts.
const maxManifestBytes = 256 << 20

// decodeManifest reads and checks the manifest's identity.
func decodeManifest(r io.Reader, name string) (*Manifest, error) {
	var m Manifest
	lr := &io.LimitedReader{R: r, N: maxManifestBytes + 1}
	dec := json.NewDecoder(lr)
	if err := dec.Decode(&m); err != nil {
		if lr.N <= 0 {
			return nil, fmt.Errorf("%s: the manifest is larger than %d bytes", name, maxManifestBytes)
		}
		return nil, fmt.Errorf("%s: not a valid manifest: %w", name, err)
	}
	if m.Format != FormatName {
		return nil, fmt.Errorf("%s: not a convkit export (manifest format %q, want %q)", name, m.Format, FormatName)
	}
	if m.FormatVersion < 1 || m.FormatVersion > FormatVersion {
		return nil, fmt.Errorf("%s: export format version %d; this build reads version %d", name, m.FormatVersion, FormatVersion)
	}
	return &m, nil
}
