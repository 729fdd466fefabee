// Package archive is convkit's archive container, shared by backup and by
// conversation export and import: a tar stream inside a zstd stream
// (.tar.zst), written and read as a stream so that memory never grows with
// the size of what is archived.
//
// The container is standard: `zstd -dc A | tar -tvf -` and
// `tar --zstd -xf A` read it. What convkit adds is discipline:
//
//   - The zstd stream is a concatenation of independent frames, each
//     holding ChunkSize bytes of the tar stream and carrying a content
//     checksum. Frames are compressed in parallel and written in order.
//     Each frame's level follows what it holds: text (plain logs, the
//     index, the manifest) gets a stronger level; bytes that are already
//     compressed (.zst logs) a faster one, which still wins back the
//     framing overhead of small append batches.
//   - Rsyncable (WriterOptions) lays the stream out for deduplicating
//     copiers: already-compressed entries stored as they are in raw
//     frames, the rest in frames cut where a rolling hash of the content
//     says, so unchanged and append-grown entries give the same bytes.
//   - Every entry is a regular file with mode 0600, no owner (uid, gid 0,
//     no user or group names) and the modification time the caller gives
//     (SetModTime: the file's own, so an unchanged file's header is too).
//     Directories are implied by the names; there are no links, devices or
//     FIFOs.
//   - Names follow the store layout (CheckStoreName): metadata.db,
//     MANIFEST.json and conversations/<encoded id>/<canonical log name>.
//   - The Reader enforces hard limits (entries, bytes per entry, bytes in
//     all, zstd window) and refuses anything else: absolute paths, "..",
//     noncanonical names, names outside the layout, duplicates, sparse
//     entries of every format and every entry that is not a regular file.
//     Extract writes only into a directory the caller made for it, so a
//     hostile archive writes nothing anywhere else, and refuses at its
//     header an entry that would not fit in that file system's free space
//     less FreeReserve; ExtractTo extracts into a staging directory and
//     renames its tree into place only after everything checked out.
//
// Around the container, what backup, restore, export and import share:
//
//   - Staging: a private directory where an archive is extracted and
//     checked before anything reaches its destination, flock'ed while its
//     process lives; SweepStaging removes those killed processes left and
//     never a live one's.
//   - TempFile: the file an archive is written to before it is published
//     under its final name, flock'ed while written; SweepTemps removes
//     those of killed writers.
//   - The manifest: ManifestHeader opens every manifest (backup's and
//     export's each embed it); a ManifestFormat writes it as the last
//     entry, decodes and checks it, and Verify is the manifest-last check
//     of an extraction: the manifest last, then every entry against it.
//     Backup and transfer keep only their own fields and policies.
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

// Names of the entries outside conversations/.
const (
	// ManifestName is the manifest entry: by convention the last one, so
	// that a writer can describe what it wrote after writing it.
	ManifestName = "MANIFEST.json"
	// IndexName is the SQLite index snapshot.
	IndexName = store.IndexFileName
)

// Kind says how an entry's content compresses; the Writer picks each
// frame's level from the kinds of the bytes in it.
type Kind int

const (
	// Text is compressible content: plain logs, SQLite, JSON.
	Text Kind = iota
	// Compressed is content that is compressed already (.zst logs).
	Compressed
)

func (k Kind) String() string {
	if k == Compressed {
		return "compressed"
	}
	return "text"
}

// FileMode is the mode of every entry, and of every file Extract writes.
const FileMode = 0o600

// CheckName refuses names that are unsafe anywhere: empty, absolute,
// holding "..", "." or empty segments, backslashes or NUL, or not in
// canonical (path.Clean) form. It says nothing about the layout.
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

// CheckStoreName accepts exactly the names of a store archive:
// MANIFEST.json, metadata.db and conversations/<dir>/<log>, where <dir> is
// a canonical encoded conversation id (store.DecodeSegment) and <log> a
// canonical log generation name (convlog.ParseName) whose base is the
// conversation log's or a canonical encoded session id.
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
	// Archive names the archive (a path, or "-" for stdin).
	Archive string
	// Entry is the 1-based index of the entry (0: not at an entry) and
	// Name its name as stored.
	Entry int
	Name  string
	// Unnamed: the entry's header could not be read, so Name is unknown.
	Unnamed bool
	// Offset is the byte offset in the tar stream (the decompressed
	// archive) of the entry's header, or of the failure.
	Offset int64
	Msg    string
	// Err is the underlying error, if any.
	Err error
	// Refused: the entry was refused (name, type, duplicate, limit), as
	// opposed to damage found in the bytes.
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

// ErrRefused is wrapped by every error that refuses an entry (a name, a
// type, a duplicate, a limit) rather than reporting damage.
var ErrRefused = errors.New("refused")
