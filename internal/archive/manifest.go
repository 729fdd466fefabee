package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
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

// ManifestHeader opens every manifest: types embed it first, so these are
// the first JSON members.
type ManifestHeader struct {
	// Format is ManifestFormat.Name; FormatVersion changes only when a
	// field changes meaning or goes away.
	Format           string    `json:"format"`
	FormatVersion    int       `json:"formatVersion"`
	Tool             string    `json:"tool"`
	ToolVersion      string    `json:"toolVersion"`
	LogFormatVersion int       `json:"logFormatVersion"` // the log format the tool writes
	CreatedAt        time.Time `json:"createdAt"`        // also every entry's modification time
	// Online: another process held runtime.lock (Holder, when readable),
	// so each log was copied up to its committed prefix.
	Online bool          `json:"online"`
	Holder *store.Holder `json:"holder"`
}

func (h *ManifestHeader) manifestHeader() *ManifestHeader { return h }

// Manifest is a struct embedding ManifestHeader that lists its archive's
// other entries.
type Manifest interface {
	manifestHeader() *ManifestHeader
	Listing() []Listed
}

// Listed is an entry as a manifest lists it.
type Listed struct {
	Name   string
	Size   int64
	SHA256 string // lower-case hex
}

// ListFiles is the Listing of a manifest's files.
func ListFiles[F any](files []F, entry func(*F) Listed) []Listed {
	out := make([]Listed, len(files))
	for i := range files {
		out[i] = entry(&files[i])
	}
	return out
}

// ManifestFormat is one kind of manifest: the backup's, the export's.
type ManifestFormat struct {
	Name     string // the format member
	Version  int    // written, and the newest read (from 1)
	Kind     string // names the archive in messages ("backup")
	MaxBytes int64
}

// Header is the header of a new manifest of this format.
func (f ManifestFormat) Header(toolVersion string, createdAt time.Time) ManifestHeader {
	return ManifestHeader{Format: f.Name, FormatVersion: f.Version, Tool: "convkit", ToolVersion: toolVersion,
		LogFormatVersion: convlog.CurrentVersion, CreatedAt: createdAt.UTC().Truncate(time.Second)}
}

// WriteManifest writes m as the last entry: one line of compact JSON, with
// <, > and & as they are.
func WriteManifest(w *Writer, m Manifest) (Sum, error) {
	var data bytes.Buffer
	enc := json.NewEncoder(&data)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return Sum{}, fmt.Errorf("encode the manifest: %w", err)
	}
	return WriteManifestJSON(w, data.Bytes())
}

// WriteManifestJSON writes data, a manifest WriteManifest would encode, as
// the last entry.
func WriteManifestJSON(w *Writer, data []byte) (Sum, error) {
	sum, err := w.WriteHashed(ManifestName, Text, data, sha256.Sum256(data))
	if err != nil {
		return Sum{}, fmt.Errorf("archive the manifest: %w", err)
	}
	return sum, nil
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

// Scan checks the archive from r as Extract would into dir, and that the
// manifest comes last, writing nothing but to spool (when given), so a
// hostile archive is refused before a file is made.
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

// Verify decodes into m the manifest that must end the archive extracted
// into dir and compares it with the entries; a missing or unreadable one is
// an *Error.
func (f ManifestFormat) Verify(archiveName, dir string, ents *ExtractedList, m Manifest) ([]store.Item, error) {
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

// maxMismatches bounds the disagreements CheckListing lists.
const maxMismatches = 1000

// CheckListing compares the entries but the manifest with listed: files
// listed twice, each entry in order, then listed files missing.
func CheckListing(ents *ExtractedList, listed []Listed) ([]store.Item, error) {
	var out []store.Item
	more := 0
	add := func(name, format string, args ...any) {
		if len(out) == maxMismatches {
			more++
			return
		}
		out = append(out, store.Item{Kind: store.ItemMismatch, Path: name, Reason: fmt.Sprintf(format, args...)})
	}
	byName := make(map[string]*Listed, len(listed))
	for i := range listed {
		l := &listed[i]
		if byName[l.Name] != nil {
			add(l.Name, "listed twice in the manifest")
		}
		byName[l.Name] = l
	}
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
		out = append(out, store.Item{Kind: store.ItemMismatch, Path: ManifestName, Reason: fmt.Sprintf("%d more disagreements with the manifest, not listed", more)})
	}
	return out, nil
}
