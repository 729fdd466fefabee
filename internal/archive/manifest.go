package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// ToolName is the tool every manifest names as its writer.
const ToolName = "convkit"

// ManifestHeader opens every manifest, a backup's or an export's: which
// manifest, what wrote the archive and when, and whether a runtime held the
// store; manifest types embed it first so these are the first JSON members.
type ManifestHeader struct {
	// Format names the kind of manifest (ManifestFormat.Name);
	// FormatVersion changes only when a field changes meaning or goes
	// away: readers ignore fields they do not know.
	Format        string `json:"format"`
	FormatVersion int    `json:"formatVersion"`
	Tool          string `json:"tool"`
	ToolVersion   string `json:"toolVersion"`
	// LogFormatVersion is the log format version the writing tool writes.
	LogFormatVersion int `json:"logFormatVersion"`
	// CreatedAt is when the archive was begun (UTC, whole seconds); every
	// entry carries it as its modification time.
	CreatedAt time.Time `json:"createdAt"`
	// Online: runtime.lock was held by another process, Holder when it
	// could be read, so each log was copied up to its committed prefix
	// while the runtime kept appending.
	Online bool          `json:"online"`
	Holder *store.Holder `json:"holder"`
}

func (h *ManifestHeader) manifestHeader() *ManifestHeader { return h }

// Manifest is a manifest type: a struct that embeds ManifestHeader and
// lists the files of its archive.
type Manifest interface {
	manifestHeader() *ManifestHeader
	// Listing is every entry of the archive but the manifest, as the
	// manifest lists it, in the manifest's order.
	Listing() []Listed
}

// Listed is an entry as a manifest lists it.
type Listed struct {
	Name   string
	Size   int64
	SHA256 string // lower-case hex
}

// ListFiles is the Listing of a manifest's files, each listed as entry
// says.
func ListFiles[F any](files []F, entry func(*F) Listed) []Listed {
	out := make([]Listed, len(files))
	for i := range files {
		out[i] = entry(&files[i])
	}
	return out
}

// Mismatch is one disagreement between an archive and its manifest.
type Mismatch struct {
	Name    string `json:"name"`
	Problem string `json:"problem"`
}

// ManifestFormat is one kind of manifest: the backup's, the export's.
type ManifestFormat struct {
	// Name is the manifest's format member, Version the formatVersion this
	// build writes and the newest it reads (it reads every version from 1).
	Name    string
	Version int
	// Kind names the archive in messages ("backup", "export").
	Kind string
	// MaxBytes bounds the manifest a reader accepts.
	MaxBytes int64
}

// Header is the header of a new manifest of this format, for an archive
// begun at createdAt (truncated to whole seconds, UTC) by toolVersion.
func (f ManifestFormat) Header(toolVersion string, createdAt time.Time) ManifestHeader {
	return ManifestHeader{Format: f.Name, FormatVersion: f.Version, Tool: ToolName, ToolVersion: toolVersion,
		LogFormatVersion: convlog.CurrentVersion, CreatedAt: createdAt.UTC().Truncate(time.Second)}
}

// WriteManifest writes m as the manifest entry, which is the last entry
// of every archive: one line of compact JSON, with <, > and & as they are.
// The caller closes w after it.
func WriteManifest(w *Writer, m Manifest) (Sum, error) {
	var data bytes.Buffer
	enc := json.NewEncoder(&data)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return Sum{}, fmt.Errorf("encode the manifest: %w", err)
	}
	sum, err := w.WriteBytes(ManifestName, Text, data.Bytes())
	if err != nil {
		return Sum{}, fmt.Errorf("archive the manifest: %w", err)
	}
	return sum, nil
}

// Decode reads a manifest of this format from r into m, which must be a
// pointer to a struct embedding ManifestHeader, and checks its header:
// the format's name, a version from 1 to f.Version, at most f.MaxBytes.
// name names the manifest in errors.
func (f ManifestFormat) Decode(r io.Reader, name string, m Manifest) error {
	if err := f.decode(r, m); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (f ManifestFormat) decode(r io.Reader, m Manifest) error {
	lr := &io.LimitedReader{R: r, N: f.MaxBytes + 1}
	if err := json.NewDecoder(lr).Decode(m); err != nil {
		if lr.N <= 0 {
			return fmt.Errorf("the manifest is larger than %d bytes", f.MaxBytes)
		}
		return fmt.Errorf("not a valid manifest: %w", err)
	}
	h := m.manifestHeader()
	if h.Format != f.Name {
		return fmt.Errorf("not a convkit %s (manifest format %s, want %s)", f.Kind, termtext.Quote(h.Format), termtext.Quote(f.Name))
	}
	if h.FormatVersion < 1 || h.FormatVersion > f.Version {
		return fmt.Errorf("%s manifest format version %d; this build reads %s", f.Kind, h.FormatVersion, f.versions())
	}
	return nil
}

func (f ManifestFormat) versions() string {
	if f.Version == 1 {
		return "version 1"
	}
	return fmt.Sprintf("versions 1 to %d", f.Version)
}

// ReadFile decodes the manifest file at path (never through a symbolic
// link) into m, as Decode does.
func (f ManifestFormat) ReadFile(path string, m Manifest) error {
	file, err := durable.OpenRegular(path, os.O_RDONLY)
	if err != nil {
		return err
	}
	defer file.Close()
	return f.Decode(file, path, m)
}

// Scan reads the archive from r through as Extract would into dir, checking
// every entry (all but their names' uniqueness), the free space of dir's
// file system and that the manifest comes last, writing nothing; so an
// import refuses a hostile or incomplete archive before a file is made.
// With a spool, every byte read is copied to it, its size taken from the
// same free space: a stream read once is then extracted from the spool.
func (f ManifestFormat) Scan(ctx context.Context, r io.Reader, dir string, spool io.Writer, opts ExtractOptions) error {
	_, last, err := scan(ctx, r, dir, spool, opts)
	if err == nil && last != ManifestName {
		err = f.notLast(opts.Archive)
	}
	return err
}

func (f ManifestFormat) notLast(archiveName string) error {
	return &Error{Archive: archiveName,
		Msg: fmt.Sprintf("no %s as the last entry: an incomplete archive, or not a convkit %s", ManifestName, f.Kind)}
}

// Verify is the manifest-last check of an archive Extract wrote into dir: the
// last entry must be the manifest (a truncated or foreign archive has none
// there), decoded into m as Decode does, and every other entry is compared
// with its Listing both ways (CheckListing). A missing or unreadable manifest
// is an *Error.
func (f ManifestFormat) Verify(archiveName, dir string, ents *ExtractedList, m Manifest) ([]Mismatch, error) {
	if ents.Len() == 0 || ents.Last().Name != ManifestName {
		return nil, f.notLast(archiveName)
	}
	file, err := durable.OpenRegular(filepath.Join(dir, ManifestName), os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	err = f.decode(file, m)
	file.Close()
	if err != nil {
		return nil, &Error{Archive: archiveName, Entry: ents.Len(), Name: ManifestName, Offset: ents.Last().Offset, Msg: err.Error()}
	}
	return CheckListing(ents, m.Listing())
}

// maxMismatches bounds the disagreements CheckListing lists; past it they
// are counted in one more.
const maxMismatches = 1000

// CheckListing compares the entries but the last (the manifest) with what a
// manifest lists. Mismatches come in this order: files listed twice, then
// each entry in archive order (not listed, another size, another SHA-256),
// then listed files the archive lacks; past maxMismatches, one says how
// many more there are. The error is one reading the entries back.
func CheckListing(ents *ExtractedList, listed []Listed) ([]Mismatch, error) {
	var out []Mismatch
	more := 0
	add := func(name, format string, args ...any) {
		if len(out) == maxMismatches {
			more++
			return
		}
		out = append(out, Mismatch{Name: name, Problem: fmt.Sprintf(format, args...)})
	}
	byName := make(map[string]*Listed, len(listed))
	for i := range listed {
		l := &listed[i]
		if byName[l.Name] != nil {
			add(l.Name, "listed twice in the manifest")
		}
		byName[l.Name] = l
	}
	// Only listed names are marked: an archive of a million entries the
	// manifest does not list costs nothing more here.
	seen := make(map[string]bool, len(listed))
	for e := range ents.All(ents.Len() - 1) {
		l := byName[e.Name]
		if l != nil {
			seen[l.Name] = true
		}
		switch {
		case l == nil:
			add(e.Name, "in the archive but not in the manifest")
		case l.Size != e.Size:
			add(e.Name, "size %d, the manifest says %d", e.Size, l.Size)
		case l.SHA256 != e.Hex():
			add(e.Name, "SHA-256 %s, the manifest says %s", e.Hex(), l.SHA256)
		}
	}
	if err := ents.Err(); err != nil {
		return nil, err
	}
	for _, l := range listed {
		if !seen[l.Name] {
			add(l.Name, "in the manifest but not in the archive")
		}
	}
	if more > 0 {
		out = append(out, Mismatch{Name: ManifestName, Problem: fmt.Sprintf("%d more disagreements with the manifest, not listed", more)})
	}
	return out, nil
}
