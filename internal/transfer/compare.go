package transfer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"maps"
	"os"
	"slices"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/store"
)

// classify sets p.Action and p.Detail: the store's copy is behind when each
// of its current logs is a prefix of the archived one, ahead in reverse, and
// diverged otherwise; one longer only by cwd-mapped events is behind.
func (imp *Staged) classify(sc *stagedConv, p *ConversationPlan) error {
	to, err := imp.s.ConversationPath(sc.id)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(to)
	if errors.Is(err, fs.ErrNotExist) {
		p.Action, p.Detail = ActionImport, "new in this store"
		return nil
	}
	if err != nil {
		return err
	}
	diverged := func(detail string) error {
		p.Detail = detail
		switch imp.opts.OnConflict {
		case ConflictReplace:
			p.Action = ActionReplace
		case ConflictSkip:
			p.Action = ActionSkip
		default:
			p.Action = ActionConflict
		}
		return nil
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return diverged(fmt.Sprintf("the store holds a symbolic link at %s", to))
	case !fi.IsDir():
		return diverged(fmt.Sprintf("the store holds a file that is not a directory at %s", to))
	}
	cd, _, err := imp.s.WalkConversation(sc.id)
	if err != nil {
		return diverged(fmt.Sprintf("the store's copy cannot be read: %v", err))
	}
	storeLogs := map[string]store.Log{}
	for _, l := range cd.Logs {
		storeLogs[l.Base] = l
	}
	if _, ok := storeLogs[store.ConversationLogBase]; !ok {
		return diverged("the store's copy has no conversation log")
	}
	si, err := imp.s.ReadConversation(sc.id)
	if err != nil {
		return diverged(fmt.Sprintf("the store's conversation log cannot be read: %v", err))
	}
	if si.Deleting {
		return diverged("the store's copy is being deleted")
	}

	// Every log of either copy, the conversation log first.
	archLogs := map[string]store.Log{}
	for _, l := range sc.dir.Logs {
		archLogs[l.Base] = l
	}
	union := maps.Clone(archLogs)
	maps.Copy(union, storeLogs)
	order := slices.Sorted(maps.Keys(union))
	i := slices.Index(order, store.ConversationLogBase)
	order = slices.Insert(slices.Delete(order, i, i+1), 0, store.ConversationLogBase)
	var behind, ahead []string // logs that make the store's copy behind, ahead
	for _, b := range order {
		sl, inStore := storeLogs[b]
		al, inArchive := archLogs[b]
		switch {
		case !inStore:
			behind = append(behind, fmt.Sprintf("%s is only in the archive", al.Current))
			continue
		case !inArchive:
			ahead = append(ahead, fmt.Sprintf("%s is only in the store", sl.Current))
			continue
		case sl.Current.String() != al.Current.String():
			return diverged(fmt.Sprintf("log %s is %s here and %s in the archive", b, sl.Current, al.Current))
		}
		rel, at, mapped, err := compareLog(sl, al)
		if err != nil {
			return diverged(fmt.Sprintf("the store's %s cannot be read: %v", sl.Current, err))
		}
		switch {
		case rel == relEqual:
		case rel == relStoreShorter:
			behind = append(behind, fmt.Sprintf("%s is longer in the archive", sl.Current))
		case rel == relStoreLonger:
			ahead = append(ahead, fmt.Sprintf("%s is longer here", sl.Current))
		case mapped && b == store.ConversationLogBase:
			p.storeCwd = si.Cwd
			behind = append(behind, fmt.Sprintf("%s is longer in the archive (the store's working directory mapping is kept)", sl.Current))
		default:
			return diverged(fmt.Sprintf("%s differs at byte %d", sl.Current, at))
		}
	}
	switch {
	case len(behind) > 0 && len(ahead) > 0:
		return diverged(fmt.Sprintf("newer in the archive (%s) and newer here (%s)", behind[0], ahead[0]))
	case len(behind) > 0:
		p.Action, p.Detail = ActionUpdate, "the store's copy is a prefix of the archived one: "+behind[0]
		extra, err := extraEntries(cd)
		if err != nil {
			return err
		}
		if extra != "" {
			p.keepAside = true
			p.Detail += fmt.Sprintf("; the old copy is kept in %s/ (its directory holds %s)", store.ReplacedDirName, extra)
		}
	case len(ahead) > 0:
		p.Action, p.Detail = ActionKeep, "the store's copy is newer: "+ahead[0]
	default:
		p.Action, p.Detail = ActionUnchanged, "identical"
	}
	return nil
}

// extraEntries names the first entry of cd that is not a current log, kept aside.
func extraEntries(cd store.ConversationDir) (string, error) {
	ents, err := os.ReadDir(cd.Path)
	if err != nil {
		return "", err
	}
	current := map[string]bool{}
	for _, l := range cd.Logs {
		current[l.Current.String()] = true
	}
	for _, e := range ents {
		if !current[e.Name()] {
			return e.Name(), nil
		}
	}
	return "", nil
}

type relation int

const (
	relEqual relation = iota
	relStoreShorter
	relStoreLonger
	relDiffer
)

// compareLog compares the store log's committed prefix with the archived
// log (at: the first differing byte), then by lines: compressed logs relate
// as their lines do, as a repair may reframe them, and mapped reports
// whether the store's lines from the first difference are cwd-mapped events.
func compareLog(sl, al store.Log) (rel relation, at int64, mapped bool, err error) {
	committed, err := committedLength(sl)
	if err != nil {
		return relDiffer, 0, false, err
	}
	sf, err := convlog.OpenFile(sl.Path)
	if err != nil {
		return relDiffer, 0, false, err
	}
	defer sf.Close()
	af, err := convlog.OpenFile(al.Path)
	if err != nil {
		return relDiffer, 0, false, err
	}
	defer af.Close()
	asize := af.Size()
	n := min(committed, asize)
	at, same, err := samePrefix(io.NewSectionReader(sf, 0, n), io.NewSectionReader(af, 0, n))
	switch {
	case err != nil:
		return relDiffer, 0, false, err
	case !same:
		rel, mapped := compareLines(sl, al)
		if rel != relDiffer && sl.Current.Compression == convlog.Zstd {
			return rel, 0, false, nil
		}
		return relDiffer, at, mapped, nil
	case committed == asize:
		return relEqual, 0, false, nil
	case committed < asize:
		return relStoreShorter, committed, false, nil
	default:
		return relStoreLonger, asize, false, nil
	}
}

// compareLines compares the logs by their lines (header included).
func compareLines(sl, al store.Log) (rel relation, mapped bool) {
	sr, err := sl.Open(convlog.ReaderOptions{})
	if err != nil {
		return relDiffer, false
	}
	defer sr.Close()
	ar, err := al.Open(convlog.ReaderOptions{})
	if err != nil {
		return relDiffer, false
	}
	defer ar.Close()
	if !bytes.Equal(sr.Header().Raw, ar.Header().Raw) {
		return relDiffer, false
	}
	next, stop := iter.Pull2(ar.Events())
	defer stop()
	differ := false
	for se, serr := range sr.Events() {
		if serr != nil {
			return relDiffer, false
		}
		if !differ {
			ae, aerr, more := next()
			switch {
			case aerr != nil:
				return relDiffer, false
			case !more:
				return relStoreLonger, false
			case bytes.Equal(se.Raw, ae.Raw):
				continue
			}
			// They differ here: mapped if the rest of the store's log is.
			differ = true
		}
		if se.Type != store.EventConversationCwdMapped {
			return relDiffer, false
		}
	}
	if differ {
		return relDiffer, true
	}
	switch _, aerr, more := next(); {
	case aerr != nil:
		return relDiffer, false
	case more:
		return relStoreShorter, false
	}
	return relEqual, false
}

func committedLength(l store.Log) (int64, error) {
	r, err := l.Open(convlog.ReaderOptions{})
	if err != nil {
		return 0, err
	}
	defer r.Close()
	for _, err := range r.Events() {
		if err != nil {
			return 0, err
		}
	}
	return r.Stats().CommittedBytes, nil
}

// samePrefix compares two readers of the same length.
func samePrefix(a, b io.Reader) (at int64, same bool, err error) {
	bufA, bufB := make([]byte, 256<<10), make([]byte, 256<<10)
	for {
		n, errA := io.ReadFull(a, bufA)
		if _, err := io.ReadFull(b, bufB[:n]); err != nil {
			return at, false, err
		}
		if !bytes.Equal(bufA[:n], bufB[:n]) {
			for i := range n {
				if bufA[i] != bufB[i] {
					return at + int64(i), false, nil
				}
			}
		}
		at += int64(n)
		switch {
		case errA == io.EOF || errA == io.ErrUnexpectedEOF:
			return at, true, nil
		case errA != nil:
			return at, false, errA
		}
	}
}
