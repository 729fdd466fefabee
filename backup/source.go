package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"

	"github.com/convkit/convkit/archive"
	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/store"
)

// smallLog is the size up to which a log is read into memory once, checked
// there and archived from the same bytes. Larger logs are checked through
// the file and then copied from the same descriptor.
const smallLog = 4 << 20

// job is one log file to archive.
type job struct {
	name    string // entry name
	path    string
	convIdx int
	convID  string
	session string // "" for the conversation log
	base    string
	gen     convlog.Name
	convLog bool
}

// loaded is a job read and checked.
type loaded struct {
	job *job
	// Exactly one of buf and f holds the bytes to archive (length of them);
	// neither when the file was left out.
	buf    []byte
	f      *os.File
	length int64
	info   Log
	kind   archive.Kind
	// liveTail: bytes past the committed prefix left out (online).
	liveTail int64
	// The file is gone (deleted since the walk): nothing to archive.
	vanished bool
	// problem: the file could not be read; it is left out.
	problem string
	// For the conversation log: what reindex will find in it.
	conv convFacts
}

// convFacts are what a conversation log says about indexing it.
type convFacts struct {
	headerType string
	headerID   string
	deleting   bool
	deps       []string
	bad        string // an event reindex's replay refuses
}

func (l *loaded) close() {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	l.buf = nil
}

// jobsOf lists the logs of a walked store in archive order: conversations
// by directory name, each one's logs by base (conversation log first),
// each log's generations from the highest.
func jobsOf(tree *store.Tree) []*job {
	var jobs []*job
	for ci, c := range tree.Conversations {
		for _, l := range c.Logs {
			for _, g := range l.Generations {
				jobs = append(jobs, &job{
					name:    path.Join(store.ConversationsDirName, c.Name, g.String()),
					path:    filepath.Join(c.Path, g.String()),
					convIdx: ci, convID: c.ID, session: l.ID, base: l.Base, gen: g,
					convLog: l.IsConversationLog,
				})
			}
		}
	}
	return jobs
}

// load opens, reads and checks one log. Online, only the committed prefix
// is kept. Bytes are read once (small logs) or checked through the file
// and later copied from the same descriptor (large ones), so the bytes
// archived are the bytes checked.
func load(j *job, online bool) *loaded {
	l := &loaded{job: j, kind: archive.Text}
	if j.gen.Compression == convlog.Zstd {
		l.kind = archive.Compressed
	}
	l.info = Log{Conversation: j.convID, Session: j.session, Version: j.gen.Version, Compression: j.gen.Compression.String()}
	lfi, err := os.Lstat(j.path)
	if errors.Is(err, fs.ErrNotExist) {
		l.vanished = true
		return l
	}
	if err != nil {
		l.problem = err.Error()
		return l
	}
	if !lfi.Mode().IsRegular() {
		l.problem = "not a regular file (symbolic links are not followed)"
		return l
	}
	f, err := os.Open(j.path)
	if errors.Is(err, fs.ErrNotExist) {
		l.vanished = true
		return l
	}
	if err != nil {
		l.problem = err.Error()
		return l
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		l.problem = err.Error()
		return l
	}
	if !os.SameFile(lfi, fi) || !fi.Mode().IsRegular() {
		f.Close()
		l.problem = "replaced while it was opened (symbolic links are not followed)"
		return l
	}
	size := fi.Size()
	var src io.ReaderAt = f
	if size <= smallLog {
		buf := make([]byte, size)
		n, err := f.ReadAt(buf, 0)
		f.Close()
		if err != nil && err != io.EOF {
			l.problem = err.Error()
			return l
		}
		// A file that shrank (a torn tail cut by the runtime) is taken as
		// read.
		buf = buf[:n]
		size = int64(n)
		l.buf = buf
		src = bytes.NewReader(buf)
	} else {
		l.f = f
	}
	l.length = size
	l.check(src, size, online)
	return l
}

// check reads the log strictly, as reindex does, and decides how much of
// it to archive.
func (l *loaded) check(src io.ReaderAt, size int64, online bool) {
	j := l.job
	comp := j.gen.Compression
	r, err := convlog.NewReader(src, size, j.name, convlog.ReaderOptions{Version: j.gen.Version, Compression: &comp})
	if err != nil {
		l.info.Error = err.Error()
		return
	}
	defer r.Close()
	if j.convLog {
		h := r.Header()
		l.conv.headerType, l.conv.headerID = h.Type, h.ID
	}
	var events, committedEvents int64
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			l.info.Error = err.Error()
			return
		}
		events++
		torn := r.InTornFrame()
		if !torn {
			committedEvents++
		}
		if j.convLog && (!online || !torn) {
			l.conv.note(e)
		}
	}
	st := r.Stats()
	if online {
		// The runtime may be appending: keep the committed prefix only.
		l.liveTail = size - st.CommittedBytes
		l.length = st.CommittedBytes
		l.info.Committed = st.CommittedBytes
		l.info.Events = committedEvents
		if l.buf != nil {
			l.buf = l.buf[:l.length]
		}
		return
	}
	l.info.Committed = st.CommittedBytes
	l.info.TornTail = st.TornTail
	l.info.Events = events
}

// note records what reindex's replay of the conversation log depends on.
func (c *convFacts) note(e *convlog.Event) {
	switch e.Type {
	case store.EventDeleteStarted:
		c.deleting = true
	case store.EventConversationForked:
		var d store.ForkedData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			if c.bad == "" {
				c.bad = fmt.Sprintf("%s at seq %d: invalid data: %v", e.Type, e.Seq, err)
			}
			return
		}
		for _, in := range d.InheritedSessions {
			c.deps = append(c.deps, in.SourceConversation)
		}
		if d.AfterCompaction {
			c.deps = append(c.deps, d.SourceConversation)
		}
	}
}

// loadAll loads jobs with workers goroutines, at most ahead results in
// memory, and hands them to sink in job order. sink runs in the caller's
// goroutine and owns each result (it must close it).
func loadAll(ctx context.Context, jobs []*job, online bool, workers, ahead int, sink func(*loaded) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]chan *loaded, len(jobs))
	for i := range results {
		results[i] = make(chan *loaded, 1)
	}
	sem := make(chan struct{}, ahead)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] <- load(jobs[i], online)
			}
		}()
	}
	go func() {
		defer close(next)
		for i := range jobs {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case next <- i:
			case <-ctx.Done():
				<-sem
				return
			}
		}
	}()
	var err error
	for i := 0; i < len(jobs) && err == nil; i++ {
		select {
		case l := <-results[i]:
			<-sem
			err = sink(l)
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	cancel()
	wg.Wait()
	// Release what was loaded but not consumed.
	for i := range results {
		select {
		case l := <-results[i]:
			l.close()
		default:
		}
	}
	return err
}

// expectations applies reindex.Run's rules to the archived logs: what a
// reindex of a store restored from the archive does with each
// conversation.
func expectations(convs []Conversation, facts map[int]*convFacts, logs map[int][]*File) Counts {
	var cnt Counts
	present := map[string]bool{}
	for ci := range convs {
		if len(logs[ci]) > 0 {
			present[convs[ci].ID] = true
		}
	}
	for ci := range convs {
		c := &convs[ci]
		files := logs[ci]
		var convLog *File
		for _, f := range files {
			if f.Log.Current && f.Log.Session == "" {
				convLog = f
			}
		}
		skip := func(format string, args ...any) {
			c.Expect, c.Reason = ExpectSkipped, fmt.Sprintf(format, args...)
		}
		fc := facts[ci]
		switch {
		case convLog == nil:
			skip("no conversation log")
		case convLog.Log.Error != "":
			skip("unreadable conversation log: %s", convLog.Log.Error)
		case fc == nil:
			skip("no conversation log")
		case fc.headerType != convlog.ConversationLog:
			skip("%s: not a conversation log (header type %q)", convLog.Name, fc.headerType)
		case fc.bad != "":
			skip("unreadable conversation log: %s", fc.bad)
		case fc.headerID != c.ID:
			skip("conversation log names id %q, but its directory is %q", fc.headerID, c.ID)
		case fc.deleting:
			c.Expect = ExpectDeleted
		}
		if fc != nil {
			c.DependsOn = uniqueSorted(fc.deps, c.ID)
		}
		if c.Expect == "" {
			for _, d := range c.DependsOn {
				if !present[d] {
					skip("fork source %q is missing: this conversation reads older history from it", d)
					break
				}
			}
		}
		if c.Expect == "" {
			for _, f := range files {
				if f.Log.Current && f.Log.Session != "" && f.Log.Error != "" {
					skip("unreadable session log: %s", f.Log.Error)
					break
				}
			}
		}
		if c.Expect == "" {
			c.Expect = ExpectIndexed
		}
		cnt.Conversations++
		switch c.Expect {
		case ExpectIndexed:
			cnt.Indexed++
			for _, f := range files {
				if f.Log.Current && f.Log.Session != "" {
					cnt.SessionLogs++
					cnt.Events += f.Log.Events
				}
			}
		case ExpectSkipped:
			cnt.Skipped++
		case ExpectDeleted:
			cnt.Deleting++
		}
	}
	return cnt
}

func uniqueSorted(ids []string, self string) []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range ids {
		if id != "" && id != self && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}
