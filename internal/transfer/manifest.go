package transfer

import (
	"io"

	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/store"
)

// The manifest's identity. FormatVersion changes only when a field changes
// meaning or goes away; readers ignore fields they do not know.
const (
	FormatName    = "convkit-export"
	FormatVersion = 1
	ToolName      = archive.ToolName
)

// manifestFormat is the export's manifest for the archive package, which
// writes, reads and checks it.
var manifestFormat = archive.ManifestFormat{Name: FormatName, Version: FormatVersion, Kind: "export", MaxBytes: 256 << 20}

// Manifest describes an export archive: its MANIFEST.json entry, written
// last (docs/TRANSFER.md).
type Manifest struct {
	// The header: format, tool and log format versions, when the export
	// started (CreatedAt), and whether runtime.lock was held by another
	// process (Online, Holder) while it ran. Export never takes the lock:
	// it always copies each log's committed prefix, so the archive is
	// consistent either way.
	archive.ManifestHeader
	// Requested are the ids named on the command line, as given.
	Requested []string `json:"requested"`
	// Conversations are the exported conversations in archive order (fork
	// ancestors before the conversations that read from them).
	Conversations []Conversation `json:"conversations"`
	// Files are the log entries in archive order (the manifest aside).
	Files []File `json:"files"`
	// Problems are what could not be exported: unreadable logs (their
	// conversation is left out whole), missing fork ancestors.
	Problems []store.Item `json:"problems"`
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

// Listing is every file the manifest lists (the manifest aside).
func (m *Manifest) Listing() []archive.Listed {
	return archive.ListFiles(m.Files, func(f *File) archive.Listed { return archive.Listed{Name: f.Name, Size: f.Size, SHA256: f.SHA256} })
}

// decodeManifest reads a manifest and checks its header.
func decodeManifest(r io.Reader, name string) (*Manifest, error) {
	var m Manifest
	if err := manifestFormat.Decode(r, name, &m); err != nil {
		return nil, err
	}
	return &m, nil
}
