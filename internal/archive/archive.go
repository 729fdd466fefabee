// Package archive is convkit's archive container, shared by backup, export and
// import: a tar stream inside a zstd stream (.tar.zst), streamed both ways.
// `tar --zstd -xf A` reads it; what convkit adds is discipline:
//
//   - The zstd stream is independent frames of ChunkSize bytes with content
//     checksums, compressed in parallel, each frame's level following what it
//     holds (text stronger, already-compressed logs faster). Rsyncable lays
//     them out for deduplicating copiers.
//   - Every entry is a regular 0600 file without owner, with the time the
//     caller gives; names follow the store layout (CheckStoreName).
//   - The Reader enforces hard limits and refuses absolute paths, "..",
//     noncanonical or duplicate names, sparse entries and non-regular files;
//     Extract writes only into a directory made for it and refuses at its
//     header an entry that would not fit in the free space.
//
// Around it, what backup, restore, export and import share: Staging (a
// private, flock'ed directory where an archive is extracted and checked;
// SweepStaging removes those of killed processes), TempFile (an archive being
// written before it is published; SweepTemps), and the manifest
// (ManifestHeader, ManifestFormat, and Verify, the manifest-last check of an
// extraction).
package archive

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// Names of the entries outside conversations/; the manifest comes last, so
// a writer describes what it wrote after writing it.
const (
	ManifestName = "MANIFEST.json"
	IndexName    = store.IndexFileName
)

// Kind says how an entry's content compresses (a log's is its
// compression); the Writer picks each frame's level from the kinds in it.
type Kind = convlog.Compression

const (
	Text       = convlog.Plain // plain logs, SQLite, JSON
	Compressed = convlog.Zstd  // .zst logs
)

// FileMode is the mode of every entry, and of every file Extract writes.
const FileMode = 0o600

// CheckName refuses names unsafe anywhere: empty, absolute, with "..",
// "." or empty segments, backslashes or NUL, or not path.Clean'ed.
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("empty name")
	case strings.HasPrefix(name, "/"):
		return errors.New("absolute path")
	case strings.ContainsRune(name, 0):
		return errors.New("NUL byte in the name")
	case strings.ContainsRune(name, '\\'):
		return errors.New("backslash in the name")
	}
	for _, seg := range strings.Split(name, "/") {
		switch seg {
		case "..":
			return errors.New(`parent directory reference ".."`)
		case ".", "":
			return errors.New("noncanonical path (empty or \".\" segment)")
		}
	}
	if path.Clean(name) != name {
		return errors.New("noncanonical path")
	}
	return nil
}

// CheckStoreName accepts exactly the names of a store archive: MANIFEST.json,
// metadata.db and conversations/<dir>/<log>, each part canonical.
func CheckStoreName(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	switch name {
	case ManifestName, IndexName:
		return nil
	}
	parts := strings.Split(name, "/")
	if len(parts) != 3 || parts[0] != store.ConversationsDirName {
		return fmt.Errorf("outside the store layout (want %s, %s or %s/<conversation>/<log>)",
			ManifestName, IndexName, store.ConversationsDirName)
	}
	if _, err := store.DecodeSegment(parts[1]); err != nil {
		return fmt.Errorf("outside the store layout: %v", err)
	}
	n, ok := convlog.ParseName(parts[2])
	if !ok || n.String() != parts[2] {
		return fmt.Errorf("outside the store layout: %s is not a canonical log file name", termtext.Quote(parts[2]))
	}
	if n.Base != store.ConversationLogBase {
		if _, err := store.DecodeBase(n.Base); err != nil {
			return fmt.Errorf("outside the store layout: %v", err)
		}
	}
	return nil
}

// Error is a problem with an archive, naming where it was found.
type Error struct {
	Archive string // a path, or "-" for stdin
	Entry   int    // 1-based (0: not at an entry)
	Name    string
	Unnamed bool  // the header was unreadable: Name is unknown
	Offset  int64 // in the tar stream, of the entry's header or the failure
	Msg     string
	Err     error
	// Refused: the entry was refused (name, type, duplicate, limit), not
	// found damaged.
	Refused bool
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Archive != "" {
		b.WriteString(e.Archive)
		b.WriteString(": ")
	}
	if e.Entry > 0 && e.Unnamed {
		fmt.Fprintf(&b, "entry %d (tar byte %d): ", e.Entry, e.Offset)
	} else if e.Entry > 0 {
		fmt.Fprintf(&b, "entry %d %s (tar byte %d): ", e.Entry, termtext.Quote(e.Name), e.Offset)
	} else if e.Offset > 0 {
		fmt.Fprintf(&b, "tar byte %d: ", e.Offset)
	}
	b.WriteString(e.Msg)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying error, and ErrRefused for a refusal.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if e.Refused {
		errs = append(errs, ErrRefused)
	}
	return errs
}

// ErrRefused is wrapped by every error that refuses an entry.
var ErrRefused = errors.New("refused")
