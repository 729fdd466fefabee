package transfer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/store"
)

// manifestFormat's Version changes only when a field changes meaning or goes away.
var manifestFormat = archive.ManifestFormat{Name: "convkit-export", Version: 1, Kind: "export", MaxBytes: 256 << 20}

// Manifest describes an export archive: its MANIFEST.json entry, written
// last (docs/TRANSFER.md).
type Manifest struct {
	archive.ManifestHeader
	Requested     []string       `json:"requested"`     // as given
	Conversations []Conversation `json:"conversations"` // in archive order: ancestors first
	Files         []File         `json:"files"`         // in archive order
	// Problems: unreadable logs (their conversation left out), missing ancestors.
	Problems []store.Item `json:"problems"`
}

// Conversation is one exported conversation, as its committed prefix replays.
type Conversation struct {
	ID              string   `json:"id"`
	Dir             string   `json:"dir"` // store.EncodeSegment(ID)
	Title           string   `json:"title"`
	Cwd             string   `json:"cwd"` // on the source machine
	Agents          []string `json:"agents"`
	Models          []string `json:"models"`
	ForkedFrom      string   `json:"forkedFrom"`
	AfterCompaction bool     `json:"afterCompaction"`
	// DependsOn are the conversations it reads older history from, all archived.
	DependsOn []string `json:"dependsOn"`
	Archived  bool     `json:"archived"`
	// Requested: named by the user, else an ancestor of AncestorOf.
	Requested  bool     `json:"requested"`
	AncestorOf []string `json:"ancestorOf"`
	Sessions   int      `json:"sessions"`
}

// File is one archived log: a current generation's committed prefix.
type File struct {
	Name         string `json:"name"` // conversations/<dir>/<log file name>
	Conversation string `json:"conversation"`
	Session      string `json:"session,omitempty"` // "" for the conversation log
	Version      int    `json:"version"`
	Size         int64  `json:"size"`
	SHA256       string `json:"sha256"`
	Committed    int64  `json:"committed"` // always Size: only committed prefixes are archived
	Events       int64  `json:"events"`
	// LeftOut are the bytes past the prefix (a torn tail, or an append in flight).
	LeftOut int64 `json:"leftOut"`
}

// Listing is every file the manifest lists (the manifest aside).
func (m *Manifest) Listing() []archive.Listed {
	return archive.ListFiles(m.Files, func(f *File) archive.Listed { return archive.Listed{Name: f.Name, Size: f.Size, SHA256: f.SHA256} })
}

// manifestParts are the manifest's conversations and files encoded as the
// export adds them, which left the encoding of 3.4 MB for 3,000
// conversations alone at the end.
type manifestParts struct {
	convs, files bytes.Buffer
}

func (p *manifestParts) add(c *Conversation, files []File) error {
	err := appendJSON(&p.convs, c)
	for i := 0; i < len(files) && err == nil; i++ {
		err = appendJSON(&p.files, &files[i])
	}
	return err
}

// appendJSON appends v and a comma to b, as json.Encoder writes it in an array.
func appendJSON(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode the manifest: %w", err)
	}
	b.Bytes()[b.Len()-1] = ',' // for Encode's newline
	return nil
}

// manifest is m encoded as archive.WriteManifest would, its conversations
// and files those added.
func (p *manifestParts) manifest(m *Manifest) ([]byte, error) {
	rest := *m
	rest.Conversations, rest.Files = []Conversation{}, []File{}
	var b bytes.Buffer
	if err := appendJSON(&b, &rest); err != nil {
		return nil, err
	}
	// Quotes inside strings are escaped: the first match is the members'.
	empty := []byte(`"conversations":[],"files":[]`)
	i := bytes.Index(b.Bytes(), empty)
	if i < 0 {
		return nil, errors.New("encode the manifest: no conversations and files members")
	}
	out := make([]byte, 0, b.Len()+p.convs.Len()+p.files.Len())
	out = append(out, b.Bytes()[:i]...)
	out = append(append(out, `"conversations":[`...), bytes.TrimSuffix(p.convs.Bytes(), []byte(","))...)
	out = append(append(out, `],"files":[`...), bytes.TrimSuffix(p.files.Bytes(), []byte(","))...)
	out = append(append(out, ']'), b.Bytes()[i+len(empty):b.Len()-1]...)
	return append(out, '\n'), nil
}

// fileCheck is what import compares each archived log with.
type fileCheck struct {
	size, events int64
	version      int
}

// verifiedManifest is a verified manifest without its file list.
type verifiedManifest struct {
	m     *Manifest
	files map[string]fileCheck
	// uncommitted names the first file not committed whole, refused once the listing agrees.
	uncommitted string
}

// verifyManifest is manifestFormat.Verify streaming the manifest, whose
// megabytes are never held; what the stream cannot read is left to Verify.
func verifyManifest(archiveName, dir string, ents *archive.ExtractedList) (*verifiedManifest, []store.Item, error) {
	if vm, listed, ok := streamManifest(dir, ents); ok {
		mm, err := archive.CheckListing(ents, listed)
		return vm, mm, err
	}
	m := &Manifest{}
	mm, err := manifestFormat.Verify(archiveName, dir, ents, m)
	if err != nil {
		return nil, nil, err
	}
	vm := &verifiedManifest{m: m, files: map[string]fileCheck{}}
	for i := range m.Files {
		vm.add(&m.Files[i])
	}
	m.Files = nil
	return vm, mm, nil
}

// add takes one file of the manifest, in its order.
func (vm *verifiedManifest) add(f *File) {
	vm.files[f.Name] = fileCheck{size: f.Size, events: f.Events, version: f.Version}
	if f.Committed != f.Size && vm.uncommitted == "" {
		vm.uncommitted = fmt.Sprintf("%s: the manifest says %d committed bytes of %d", f.Name, f.Committed, f.Size)
	}
}

// streamManifest reads the manifest entry as a stream; false leaves it to Verify.
func streamManifest(dir string, ents *archive.ExtractedList) (vm *verifiedManifest, listed []archive.Listed, ok bool) {
	if ents.Len() == 0 || ents.Last().Name != archive.ManifestName {
		return nil, nil, false
	}
	file, err := durable.OpenRegular(filepath.Join(dir, archive.ManifestName), os.O_RDONLY)
	if err != nil {
		return nil, nil, false
	}
	defer file.Close()
	lr := &io.LimitedReader{R: file, N: manifestFormat.MaxBytes + 1}
	vm, listed, ok = decodeManifestStream(lr)
	if !ok || lr.N <= 0 {
		return nil, nil, false
	}
	// A manifest Verify refuses is Verify's to report.
	if h := vm.m.ManifestHeader; h.Format != manifestFormat.Name || h.FormatVersion < 1 || h.FormatVersion > manifestFormat.Version {
		return nil, nil, false
	}
	return vm, listed, true
}

// decodeManifestStream decodes a manifest as json.Decoder.Decode would,
// keeping of the files their listing and checks; false where it may differ.
func decodeManifestStream(r io.Reader) (vm *verifiedManifest, listed []archive.Listed, ok bool) {
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, false
	}
	m := &Manifest{}
	vm = &verifiedManifest{files: map[string]fileCheck{}}
	// The members but the arrays streamed, decoded together at the end.
	var rest bytes.Buffer
	rest.WriteByte('{')
	var seenFiles, seenConvs bool
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, false
		}
		key, isKey := t.(string)
		if !isKey {
			return nil, nil, false
		}
		// Names matched without regard to case, and repeats, are encoding/json's.
		switch {
		case key == "files" && !seenFiles:
			seenFiles = true
			if !streamArray(dec, func(f File) {
				listed = append(listed, archive.Listed{Name: f.Name, Size: f.Size, SHA256: f.SHA256})
				vm.add(&f)
			}) {
				return nil, nil, false
			}
		case key == "conversations" && !seenConvs:
			seenConvs = true
			m.Conversations = []Conversation{}
			if !streamArray(dec, func(c Conversation) { m.Conversations = append(m.Conversations, c) }) {
				return nil, nil, false
			}
		case strings.EqualFold(key, "files") || strings.EqualFold(key, "conversations"):
			return nil, nil, false
		default:
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				return nil, nil, false
			}
			if rest.Len() > 1 {
				rest.WriteByte(',')
			}
			kb, err := json.Marshal(key)
			if err != nil {
				return nil, nil, false
			}
			rest.Write(kb)
			rest.WriteByte(':')
			rest.Write(v)
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, nil, false
	}
	rest.WriteByte('}')
	convs := m.Conversations
	if err := json.Unmarshal(rest.Bytes(), m); err != nil {
		return nil, nil, false
	}
	m.Conversations = convs
	vm.m = m
	return vm, listed, true
}

// streamArray hands each element of an array of T to each; false when it is not one.
func streamArray[T any](dec *json.Decoder, each func(T)) bool {
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return false
	}
	for dec.More() {
		var v T
		if dec.Decode(&v) != nil {
			return false
		}
		each(v)
	}
	t, err := dec.Token()
	return err == nil && t == json.Delim(']')
}
