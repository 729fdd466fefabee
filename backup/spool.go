package backup

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/internal/durable"
)

// A backup's manifest lists every file of the store, and it is written
// last, when the counts are known: held in memory, it grew with the store
// (195 MiB at 29,000 files). So the two lists that grow with the store,
// its conversations and its files, are spooled as they come, each element
// as its JSON, to temporary files, and the manifest entry is put together
// from the header, the spools and the problems at the end. The bytes are
// exactly those of encoding the whole Manifest at once (one line of
// compact JSON, <, > and & as they are): the format and its version do not
// change, and every reader of an archive reads it as before.

// spool is one list of the manifest, spooled: its elements' JSON, comma
// separated, held in memory up to memory bytes and beyond it in a file at
// path, removed as soon as it is made (where the system allows; else at
// close). A store of a few thousand files never writes one.
type spool struct {
	path    string
	memory  int
	mem     []byte
	f       *os.File
	w       *bufio.Writer
	buf     bytes.Buffer
	enc     *json.Encoder
	n, size int64
}

// defaultSpoolMemory is how much of one list is held in memory.
const defaultSpoolMemory = 1 << 20

// newSpool makes a spool that writes to path, which must not exist (a
// private file), once its list outgrows memory bytes (0: the default).
func newSpool(path string, memory int) *spool {
	if memory <= 0 {
		memory = defaultSpoolMemory
	}
	s := &spool{path: path, memory: memory}
	s.enc = json.NewEncoder(&s.buf)
	s.enc.SetEscapeHTML(false)
	return s
}

// add appends one element.
func (s *spool) add(v any) error {
	s.buf.Reset()
	if s.n > 0 {
		s.buf.WriteByte(',')
	}
	if err := s.enc.Encode(v); err != nil {
		return err
	}
	b := bytes.TrimSuffix(s.buf.Bytes(), []byte{'\n'})
	if s.f == nil && len(s.mem)+len(b) > s.memory {
		if err := s.toFile(); err != nil {
			return err
		}
	}
	if s.f == nil {
		s.mem = append(s.mem, b...)
	} else if _, err := s.w.Write(b); err != nil {
		return fmt.Errorf("spooling the manifest: %w", err)
	}
	s.n++
	s.size += int64(len(b))
	return nil
}

// toFile moves the list to the spool's file.
func (s *spool) toFile() error {
	f, err := os.OpenFile(s.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, durable.FileMode)
	if err != nil {
		return fmt.Errorf("spooling the manifest: %w", err)
	}
	if os.Remove(s.path) == nil {
		s.path = ""
	}
	s.f, s.w = f, bufio.NewWriterSize(f, 256<<10)
	if _, err := s.w.Write(s.mem); err != nil {
		return fmt.Errorf("spooling the manifest: %w", err)
	}
	s.mem = nil
	return nil
}

// reader is the spooled elements.
func (s *spool) reader() (io.Reader, error) {
	if s.f == nil {
		return bytes.NewReader(s.mem), nil
	}
	if err := s.w.Flush(); err != nil {
		return nil, fmt.Errorf("spooling the manifest: %w", err)
	}
	return io.NewSectionReader(s.f, 0, s.size), nil
}

func (s *spool) close() {
	if s.f == nil {
		return
	}
	s.f.Close()
	if s.path != "" {
		os.Remove(s.path)
	}
}

// writeManifest writes m as the archive's manifest entry, with the
// conversations and files spooled in place of its own (empty) lists.
func writeManifest(aw *archive.Writer, m *Manifest, convs, files *spool) error {
	encode := func(v any) ([]byte, error) {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return nil, fmt.Errorf("encode the manifest: %w", err)
		}
		return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
	}
	lists := *m
	lists.Conversations, lists.Files = []Conversation{}, []File{}
	whole, err := encode(&lists)
	if err != nil {
		return err
	}
	probs, err := encode(m.Problems)
	if err != nil {
		return err
	}
	// The lists are the manifest's last members: what follows the header
	// and counts is exactly this.
	tail := append([]byte(`"conversations":[],"files":[],"problems":`), probs...)
	tail = append(tail, '}')
	if !bytes.HasSuffix(whole, tail) {
		return errors.New("encode the manifest: conversations, files and problems are not its last members")
	}
	head := whole[:len(whole)-len(tail)]
	cr, err := convs.reader()
	if err != nil {
		return err
	}
	fr, err := files.reader()
	if err != nil {
		return err
	}
	parts := []io.Reader{bytes.NewReader(head), bytes.NewReader([]byte(`"conversations":[`)), cr,
		bytes.NewReader([]byte(`],"files":[`)), fr, bytes.NewReader([]byte(`],"problems":`)), bytes.NewReader(probs),
		bytes.NewReader([]byte("}\n"))}
	size := int64(len(head)+len(`"conversations":[`)+len(`],"files":[`)+len(`],"problems":`)+len(probs)+2) + convs.size + files.size
	if _, err := aw.WriteEntry(archive.ManifestName, archive.Text, size, io.MultiReader(parts...)); err != nil {
		return fmt.Errorf("archive the manifest: %w", err)
	}
	return nil
}
