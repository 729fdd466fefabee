package backup

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"path"
	"path/filepath"
	"slices"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// smallLog: a log up to it is read into memory, checked and archived from
// the same bytes; larger ones through one descriptor.
const smallLog = archive.MaxPooledBuf

// job is one log file to archive.
type job struct {
	name    string // entry name
	path    string
	convIdx int
	convID  string
	convDir string
	gen     convlog.Name
	log     store.Log
}

// loaded is a job read and checked.
type loaded struct {
	job *job
	// buf or f holds the length bytes to archive; online, prefix says
	// what of f.
	buf      []byte
	sum      [sha256.Size]byte // of buf
	f        *convlog.File
	length   int64
	prefix   *convlog.Prefix
	copy     bool // buf is a prefix copied here, not a pooled buffer
	info     Log
	mtime    time.Time
	liveTail int64  // bytes past the committed prefix left out (online)
	vanished bool   // deleted since the walk
	problem  string // why it could not be read; it is left out
	shapeErr string // the structure check's failure
	conv     convFacts
}

// convFacts are what reindex.Accept decides from in a conversation log.
type convFacts struct {
	err      error // the header names another log, or the replay failed
	deleting bool
	deps     []string
}

// convLogs is one conversation's logs as read, in archive order.
type convLogs struct {
	Conversation
	idx   int
	facts *convFacts // of its conversation log, read strictly
	files []File
	base  string // of the last log added
}

// add takes the conversation's next log (the first of a base is its
// current generation) and returns the Log kept.
func (c *convLogs) add(l *loaded, f File) *Log {
	if j := l.job; j.log.Base != c.base || len(c.files) == 0 {
		c.base = j.log.Base
		l.info.Current = true
		if j.log.IsConversationLog && l.info.Strict {
			fc := l.conv
			c.facts = &fc
		}
	}
	info := l.info
	f.Log = &info
	c.files = append(c.files, f)
	return f.Log
}

func (l *loaded) close() {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	if l.buf != nil {
		if !l.copy {
			archive.PutBuf(l.buf)
		}
		l.buf = nil
	}
}

func (l *loaded) archive(aw *archive.Writer) (archive.Sum, error) {
	kind, name := l.job.gen.Compression, l.job.name
	switch {
	case l.f == nil:
		return aw.WriteHashed(name, kind, l.buf, l.sum)
	case l.prefix != nil:
		return aw.WriteEntry(name, kind, l.length, l.prefix.Reader(l.f))
	}
	return aw.WriteEntry(name, kind, l.length, io.NewSectionReader(l.f, 0, l.length))
}

// jobsOf yields the logs of a walked tree in archive order: each
// conversation's by base, generations highest first.
func jobsOf(tree *store.Tree) iter.Seq[*job] {
	return func(yield func(*job) bool) {
		for ci, c := range tree.Conversations {
			for _, l := range c.Logs {
				for _, g := range l.Generations {
					if !yield(&job{
						name:    path.Join(store.ConversationsDirName, c.Name, g.String()),
						path:    filepath.Join(c.Path, g.String()),
						convIdx: ci, convID: c.ID, convDir: c.Name, gen: g, log: l,
					}) {
						return
					}
				}
			}
		}
	}
}

// storeWalk walks the store one conversation directory at a time, so
// memory does not grow with it: a first pass counts the logs and orders
// the directories by age (rsyncable); jobs walks each again.
type storeWalk struct {
	s        *store.Store
	dirs     []store.Dir
	logs     int
	problems []store.Item
}

func walkStore(s *store.Store, byAge bool) (*storeWalk, error) {
	dirs, top, err := s.Dirs()
	if err != nil {
		return nil, err
	}
	w := &storeWalk{s: s, dirs: dirs, problems: top}
	newest := map[string]int64{}
	for _, d := range dirs {
		t := s.WalkDir(d)
		for _, c := range t.Conversations {
			for _, l := range c.Logs {
				w.logs += len(l.Generations)
			}
			if byAge {
				newest[d.Name] = c.Newest()
			}
		}
	}
	if byAge {
		slices.SortStableFunc(w.dirs, func(a, b store.Dir) int { return cmp.Compare(newest[a.Name], newest[b.Name]) })
	}
	return w, nil
}

func (w *storeWalk) jobs() iter.Seq[*job] {
	return func(yield func(*job) bool) {
		n := 0
		for _, d := range w.dirs {
			t := w.s.WalkDir(d)
			w.problems = append(w.problems, t.Problems...)
			for j := range jobsOf(t) {
				j.convIdx = n
				if !yield(j) {
					return
				}
			}
			n++
		}
	}
}

// load opens, reads and checks one log, so that the bytes archived are the
// bytes checked.
func load(j *job, online, strict bool) *loaded {
	l := &loaded{job: j, info: Log{Session: j.log.ID}}
	f, err := convlog.OpenFile(j.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		l.vanished = true
		return l
	case errors.Is(err, durable.ErrSymlink), errors.Is(err, durable.ErrNotRegular):
		l.problem = "not a regular file (symbolic links are not followed)"
		return l
	case err != nil:
		l.problem = termtext.Reason(j.path, err) // reported beside the path
		return l
	}
	size := f.Size()
	l.mtime = f.ModTime()
	var src io.ReaderAt
	if size <= smallLog {
		// A file that shrank (a torn tail cut) is taken as read.
		buf := archive.GetBuf(size)
		n, rerr := f.ReadAt(buf, 0)
		f.Close()
		if rerr != nil && rerr != io.EOF {
			archive.PutBuf(buf)
			l.problem = termtext.Reason(j.path, rerr)
			return l
		}
		l.buf, size = buf[:n], int64(n)
		src = convlog.Bytes(l.buf)
	} else {
		l.f, src = f, f
	}
	l.length = size
	l.check(src, size, online, strict)
	if l.buf != nil {
		l.sum = sha256.Sum256(l.buf)
	}
	return l
}

// check finds the committed prefix and, with strict, reads every event as
// reindex does; online the committed prefix is kept unless the check
// failed.
func (l *loaded) check(src io.ReaderAt, size int64, online, strict bool) {
	j := l.job
	// A strict read that finds the whole log committed gives its prefix.
	var pr convlog.Prefix
	whole := false
	if strict {
		pr, whole = l.read(src, size)
	}
	if !whole {
		var err error
		if pr, err = convlog.CommittedPrefix(src, size, j.gen.Compression, j.name); err != nil {
			// The structure check's failure is the log's one error.
			l.conv, l.info.Events = convFacts{}, 0
			l.shapeErr = err.Error()
			l.info.fail(err)
			return
		}
	}
	l.info.Committed, l.info.TornTail = pr.Bytes, pr.Torn
	l.info.Strict = strict
	if !online || l.info.Error != "" {
		return
	}
	// The runtime may be appending: keep the committed prefix only.
	l.liveTail = size - pr.Bytes
	l.length = pr.Len()
	l.info.Committed = l.length
	l.info.TornTail = false
	switch {
	case pr.RecoveredBytes == 0 && l.buf != nil:
		l.buf = l.buf[:l.length]
	case l.buf != nil:
		cp, err := io.ReadAll(pr.Reader(src)) // a torn frame's lines recovered: rare
		archive.PutBuf(l.buf)
		l.buf, l.copy = cp, true
		if err != nil {
			l.info.fail(fmt.Errorf("%s: %v", j.name, err))
		}
	default:
		l.prefix = &pr
	}
}

// read reads every event strictly, noting what reindex needs of a
// conversation log; whole: the whole file is committed.
func (l *loaded) read(src io.ReaderAt, size int64) (pr convlog.Prefix, whole bool) {
	j := l.job
	rd, err := archive.ReadLog(src, size, j.name, j.log, j.gen, true)
	var ie *convlog.IdentityError
	switch {
	case j.log.IsConversationLog && errors.As(err, &ie):
		// Skipped by reindex (reindex.Accept), not invalid.
		l.conv.err = err
		return
	case err != nil:
		l.info.fail(err)
		return
	case rd.RuleErr != nil:
		// The admission reindex applies: a log it refuses is invalid here too.
		l.info.fail(rd.RuleErr)
		l.info.ruleOnly = true
	}
	if rd.InfoErr != nil {
		l.conv.err = rd.InfoErr
	} else if rd.Info != nil {
		l.conv.deleting, l.conv.deps = rd.Info.Deleting, store.Dependencies(rd.Info)
	}
	l.info.Events = rd.Events
	return rd.Prefix, rd.Whole && rd.Prefix.Bytes == size
}

// loadAll loads jobs in parallel, handing them to sink in order; sink
// must close each.
func loadAll(ctx context.Context, jobs iter.Seq[*job], online, strict bool, workers, ahead int, sink func(*loaded) error) error {
	get := func(j *job) *loaded { return load(j, online, strict) }
	return archive.ReadAhead(ctx, jobs, archive.Ahead{Workers: workers, Items: ahead}, get, nil, sink, (*loaded).close)
}

func emitter(fn func(store.Item)) func(store.Item) {
	if fn == nil {
		return func(store.Item) {}
	}
	return fn
}
