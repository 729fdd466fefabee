package transfer

import (
	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/store"
)

// manifestFormat's Version changes only when a field changes meaning or
// goes away.
var manifestFormat = archive.ManifestFormat{Name: "convkit-export", Version: 1, Kind: "export", MaxBytes: 256 << 20}

// Manifest describes an export archive: its MANIFEST.json entry, written
// last (docs/TRANSFER.md).
type Manifest struct {
	archive.ManifestHeader
	Requested     []string       `json:"requested"`     // as given
	Conversations []Conversation `json:"conversations"` // in archive order: ancestors first
	Files         []File         `json:"files"`         // in archive order
	// Problems are what could not be exported: unreadable logs (their
	// conversation is left out whole), missing fork ancestors.
	Problems []store.Item `json:"problems"`
}

// Conversation is one exported conversation, as its conversation log's
// committed prefix replays.
type Conversation struct {
	ID              string   `json:"id"`
	Dir             string   `json:"dir"` // store.EncodeSegment(ID)
	Title           string   `json:"title"`
	Cwd             string   `json:"cwd"` // on the source machine
	Agents          []string `json:"agents"`
	Models          []string `json:"models"`
	ForkedFrom      string   `json:"forkedFrom"`
	AfterCompaction bool     `json:"afterCompaction"`
	// DependsOn are the conversations it reads older history from; each
	// travels in the same archive.
	DependsOn []string `json:"dependsOn"`
	Archived  bool     `json:"archived"`
	// Requested: named by the user; otherwise added as a fork ancestor of
	// AncestorOf.
	Requested  bool     `json:"requested"`
	AncestorOf []string `json:"ancestorOf"`
	Sessions   int      `json:"sessions"`
}

// File is one archived log: the current (highest) generation of one log,
// cut at its committed prefix.
type File struct {
	Name         string `json:"name"` // conversations/<dir>/<log file name>
	Conversation string `json:"conversation"`
	Session      string `json:"session,omitempty"` // "" for the conversation log
	Version      int    `json:"version"`
	Size         int64  `json:"size"`
	SHA256       string `json:"sha256"`
	Committed    int64  `json:"committed"` // always Size: only committed prefixes are archived
	Events       int64  `json:"events"`
	// LeftOut are the bytes past the committed prefix the source held when
	// it was read (a torn tail, or an append in flight).
	LeftOut int64 `json:"leftOut"`
}

// Listing is every file the manifest lists (the manifest aside).
func (m *Manifest) Listing() []archive.Listed {
	return archive.ListFiles(m.Files, func(f *File) archive.Listed { return archive.Listed{Name: f.Name, Size: f.Size, SHA256: f.SHA256} })
}
