package upgrade

import (
	"cmp"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/durable"
)

// ErrSourceChanged: the source or its children changed during the upgrade;
// nothing was published, and a retry may succeed.
var ErrSourceChanged = errors.New("historical session generation changed during migration")

// SourceChangedError names the log that changed, and what changed.
type SourceChangedError struct {
	Path, What string
}

func (e *SourceChangedError) Error() string {
	return ErrSourceChanged.Error() + `: "` + e.Path + `": ` + e.What
}

func (e *SourceChangedError) Unwrap() error { return ErrSourceChanged }

// PublishOptions tune Stage.
type PublishOptions struct {
	// Compression of the successor; nil keeps the source's.
	Compression *convlog.Compression
	// Children, when non-nil, are used as given; else they are collected
	// from Finder (default DirChildren) and checked again before publication.
	Children []ChildFact
	Finder   ChildFinder
	// CheckHeader is a layout's rule that the header names the log's place.
	CheckHeader func(*convlog.Header) error
	// Warn receives warnings: children that could not be read.
	Warn func(string)
	// BeforePublish (a test hook) runs after the stage is verified, before
	// the source is checked again.
	BeforePublish func()
	// Publications, shared by a batch's jobs, lets a child replaced by the
	// batch's own successor count as unchanged.
	Publications *Publications

	afterLink func() // a test hook: after the link, before it is recorded
}

// SuccessorPath is where Publish puts src's successor: <base>.v4.jsonl[.zst].
func SuccessorPath(src string, c convlog.Compression) (string, error) {
	n, ok := convlog.ParseName(filepath.Base(src))
	if !ok {
		return "", fmt.Errorf("%s: not a log generation name (<base>[.vN].jsonl[.zst|.zstd])", src)
	}
	next := convlog.Name{Base: n.Base, Version: convlog.CurrentVersion, Compression: c}
	if c == convlog.Zstd && n.Compression == convlog.Zstd {
		next.Suffix = n.Suffix
	}
	return filepath.Join(filepath.Dir(src), next.String()), nil
}

// Staged is a successor written and checked in its temporary file; exactly
// one of Publish or Discard must be called.
type Staged struct {
	src, dst string
	opts     PublishOptions
	tmp      *os.File
	st       *staged
	id0      fileIdentity
	id       string // the log id the source's header names
	// children were found before the upgrade among seen (nil: not watched).
	children []ChildFact
	seen     map[string]ChildFact
	finder   ChildFinder
	done     bool
}

// Stage upgrades the log at src into a temporary file beside it, checking
// every frame as it is written. On an error nothing is left behind.
func Stage(src string, opts PublishOptions) (*Staged, error) {
	id0, err := statIdentity(src)
	if err != nil {
		return nil, err
	}
	// LowMemory: a migration holds several.
	src0, err := convlog.Open(src, convlog.ReaderOptions{LowMemory: true})
	if err != nil {
		return nil, err
	}
	defer src0.Close()
	srcHeader := src0.Header()
	if opts.CheckHeader != nil {
		if err := opts.CheckHeader(srcHeader); err != nil {
			return nil, err
		}
	}
	if srcHeader.Version >= convlog.CurrentVersion {
		return nil, fmt.Errorf("%s: log is already at the current format version (v%d)", src, srcHeader.Version)
	}
	comp := src0.Compression()
	if opts.Compression != nil {
		comp = *opts.Compression
	}
	dst, err := SuccessorPath(src, comp)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(src)

	s := &Staged{src: src, dst: dst, opts: opts, id0: id0, id: srcHeader.ID, finder: cmp.Or[ChildFinder](opts.Finder, DirChildren(dir))}
	children := opts.Children
	if children == nil && srcHeader.Type == convlog.SessionLog {
		s.seen = map[string]ChildFact{}
		if s.children, err = findChildren(s.finder, s.id, s.seen); err != nil {
			return nil, err
		}
		for i := range s.children {
			c := &s.children[i]
			c.readDescriptors()
			if c.Warning != "" && opts.Warn != nil {
				opts.Warn(c.Warning)
			}
		}
		children = s.children
	}
	r, err := FromReader(src0, src, Options{Children: children})
	if err != nil {
		return nil, err
	}

	tmp, err := durable.CreateTemp(dir, "."+filepath.Base(dst))
	if err != nil {
		return nil, err
	}
	if s.st, err = writeStage(tmp, r, comp); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	if stageWritten != nil {
		stageWritten(tmp.Name())
	}
	s.tmp = tmp
	return s, nil
}

// Discard removes an unpublished stage's temporary file.
func (s *Staged) Discard() {
	if s.done {
		return
	}
	s.done = true
	s.tmp.Close()
	os.Remove(s.tmp.Name())
}

// Publish makes the successor durable, reads it back, checks the source and
// its children are unchanged since Stage, and links it without overwriting;
// an existing successor is accepted only if it begins with the staged bytes.
func (s *Staged) Publish() (dst string, err error) {
	if s.done {
		return "", fmt.Errorf("%s: stage already published or discarded", s.src)
	}
	tmp, tmpName, opts, src, st := s.tmp, s.tmp.Name(), s.opts, s.src, s.st
	defer s.Discard() // nothing once handed to durable.Publish
	// The stage is read back while it is fsynced: both must succeed before
	// anything is published, and the read no longer waits for the disk.
	synced := make(chan error, 1)
	go func() { synced <- tmp.Sync() }()
	n, same, verr := st.readBack(tmpName, true)
	if err := <-synced; err != nil {
		return "", fmt.Errorf("fsync %s: %w", tmpName, err)
	}
	if verr == nil && (n != st.size || !same) {
		verr = fmt.Errorf("staged session generation changed during verification (%d bytes read back, %d written)", n, st.size)
	}
	if verr != nil {
		return "", fmt.Errorf("%s: staged successor failed verification: %v", tmpName, verr)
	}
	if opts.BeforePublish != nil {
		opts.BeforePublish()
	}
	id1, err := statIdentity(src)
	if err != nil {
		return "", &SourceChangedError{Path: src, What: "it can no longer be read: " + err.Error()}
	}
	if d := s.id0.change(id1); d != "" {
		return "", &SourceChangedError{Path: src, What: d}
	}
	if s.seen != nil {
		later, err := findChildren(s.finder, s.id, s.seen)
		if err != nil {
			return "", &SourceChangedError{Path: src, What: "its child sessions could not be listed again: " + err.Error()}
		}
		if d := childrenDiff(s.children, later, opts.Publications); d != "" {
			return "", &SourceChangedError{Path: src, What: d}
		}
	}
	dst = s.dst
	// Recorded before the link: a parent may look at its children any time.
	pub := publication{src: s.id0, dstPath: dst, id: s.id}
	if fi, err := tmp.Stat(); err == nil {
		pub.dst = identityOf(fi)
	}
	opts.Publications.linking(src, pub)
	s.done = true
	if err := durable.Publish(tmp, dst); err != nil {
		opts.Publications.linked(src, false)
		if !errors.Is(err, durable.ErrExists) {
			return "", err
		}
		if why := sameStagedPrefix(dst, st); why != "" {
			return "", fmt.Errorf(`current session generation already exists at "%s": %s`, dst, why)
		}
		return dst, nil
	}
	if opts.afterLink != nil {
		opts.afterLink()
	}
	opts.Publications.linked(src, true)
	return dst, nil
}

// staged is each write's length and GMAC tag under a key only this Publish
// holds, for the read-back (GMAC: 2.7 times SHA-256's speed, and FIPS).
type staged struct {
	size    int64
	mac     cipher.AEAD
	writes  []stagedWrite
	longest int
}

type stagedWrite struct {
	n   int
	tag [12 + 16]byte // nonce and tag
}

func newStaged() (*staged, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	mac, err := cipher.NewGCMWithRandomNonce(b)
	if err != nil {
		return nil, err
	}
	return &staged{mac: mac}, nil
}

func (st *staged) add(b []byte) {
	w := stagedWrite{n: len(b)}
	st.mac.Seal(w.tag[:0], nil, nil, b)
	st.writes = append(st.writes, w)
	st.size += int64(len(b))
	st.longest = max(st.longest, len(b))
}

// readBack reports how many bytes it read from the regular file at path and
// whether they are exactly those written; toEOF reads on (longer differs).
func (st *staged) readBack(path string, toEOF bool) (n int64, same bool, err error) {
	f, err := durable.OpenRegular(path, os.O_RDONLY)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	// A read per write: io.Copy's 32 KiB took a read per 32 KiB.
	buf := make([]byte, max(st.longest, 4<<10))
	same = true
	for i := range st.writes {
		w := &st.writes[i]
		m, err := io.ReadFull(f, buf[:w.n])
		n += int64(m)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return n, false, nil
		}
		if err != nil {
			return n, false, err
		}
		if _, err := st.mac.Open(nil, nil, w.tag[:], buf[:m]); err != nil {
			same = false
		}
	}
	if toEOF {
		rest, err := io.Copy(io.Discard, f)
		return n + rest, same && rest == 0, err
	}
	return n, same, nil
}

// sameStagedPrefix returns "" when an existing successor is a regular file
// beginning with exactly the staged bytes, else why not.
func sameStagedPrefix(path string, st *staged) string {
	n, same, err := st.readBack(path, false)
	switch {
	case errors.Is(err, durable.ErrSymlink) || errors.Is(err, durable.ErrNotRegular):
		return "it is not a regular file"
	case err != nil:
		return err.Error()
	case n < st.size:
		return "it is shorter than the staged successor"
	case !same:
		return "its content differs from the staged successor"
	}
	return ""
}

// OpenAppend opens a log for appending as the runtime does: an older log's
// successor is published first and appended to.
func OpenAppend(path string, wopts convlog.WriterOptions) (w *convlog.Writer, current string, err error) {
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err != nil {
		return nil, "", err
	}
	version := r.Header().Version
	r.Close()
	current = path
	if version < convlog.CurrentVersion {
		s, err := Stage(path, PublishOptions{})
		if err == nil {
			current, err = s.Publish()
		}
		if err != nil {
			return nil, "", fmt.Errorf("upgrading %s before writing: %w", path, err)
		}
	}
	w, err = convlog.OpenAppend(current, wopts)
	if err != nil {
		return nil, "", err
	}
	return w, current, nil
}
