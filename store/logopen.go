package store

import (
	"fmt"
	"path"
	"path/filepath"

	"github.com/convkit/convkit/convlog"
)

// Opening a log the store holds.
//
// A log's place in the store says whose it is: the conversation log
// (metadata[.vN].jsonl[.zst]) is the log of the conversation its directory
// names, a session log (<session>[.vN].jsonl[.zst]) the log of the session
// its file name names. A log whose header names another (a log copied or
// renamed under another's name) holds events that belong elsewhere, and is
// refused when it is opened, with a *convlog.IdentityError. Every reader
// of a store's logs gets them as Log values from the handle (Walk,
// WalkConversation, FindLog, LogAt) and opens them through their methods,
// so no caller decides the check again, or forgets it.

// LogAt is the log of the file name names in the store, a slash-separated
// path relative to the data directory (conversations/<conversation>/<log
// generation>, as an archive names it), with that generation as its
// current one: for a reader of a file the walk has not listed yet (an
// entry as it is extracted). It reads nothing.
func (s *Store) LogAt(name string) (Log, error) {
	dir, file := path.Split(name)
	conv := path.Base(dir)
	if path.Clean(dir) != path.Join(ConversationsDirName, conv) || conv == "." || conv == ".." {
		return Log{}, fmt.Errorf("%s: not a log of the store (%s/<conversation>/<log>)", name, ConversationsDirName)
	}
	return logIn(filepath.Join(s.dataDir, filepath.FromSlash(name)), conv, file)
}

// LooseLog is the log at path, a file laid out as a store's log
// (<conversation directory>/<log generation>) that no open store reaches:
// a file named by its path (inspect PATH). Readers of a store's files get
// them from the handle instead.
func LooseLog(path string) (Log, error) {
	return logIn(path, filepath.Base(filepath.Dir(path)), filepath.Base(path))
}

// logIn is the Log of the generation file at p in the conversation
// directory convDir.
func logIn(p, convDir, file string) (Log, error) {
	n, ok := convlog.ParseName(file)
	if !ok {
		return Log{}, fmt.Errorf("%s: not a log file name (<base>[.vN].jsonl[.zst])", p)
	}
	conv, err := DecodeSegment(convDir)
	if err != nil {
		return Log{}, fmt.Errorf("%s: not in a conversation directory: %w", p, err)
	}
	l := Log{Base: n.Base, Conversation: conv, Generations: []convlog.Name{n}, Current: n, Path: p}
	if n.Base == ConversationLogBase {
		l.IsConversationLog = true
	} else if l.ID, err = DecodeBase(n.Base); err != nil {
		return Log{}, fmt.Errorf("%s: %w", p, err)
	}
	return l, nil
}

// identity is the header type (convlog.ConversationLog or
// convlog.SessionLog) and id the log's place implies.
func (l Log) identity() (typ, id string) {
	if l.IsConversationLog {
		return convlog.ConversationLog, l.Conversation
	}
	return convlog.SessionLog, l.ID
}

// ReaderOptions is opts with WantType and WantID set to the identity the
// log's place implies: for readers that read the log through a descriptor
// of their own (convlog.OpenFile, then convlog.NewReader over what they
// read).
func (l Log) ReaderOptions(opts convlog.ReaderOptions) convlog.ReaderOptions {
	opts.WantType, opts.WantID = l.identity()
	return opts
}

// Open opens the log's current generation for reading: as convlog.Open
// opens every log (never through a symbolic link, never blocking, a
// regular file only), with the identity its place implies checked on its
// header. A header of another log is refused with a *convlog.IdentityError
// naming the file.
func (l Log) Open(opts convlog.ReaderOptions) (*convlog.Reader, error) {
	return convlog.Open(l.Path, l.ReaderOptions(opts))
}

// CheckHeader refuses h unless it names the log its place implies: for
// readers that get the header another way (the upgrade chain reads the
// source itself).
func (l Log) CheckHeader(h *convlog.Header) error {
	typ, id := l.identity()
	if err := convlog.CheckIdentity(h, typ, id); err != nil {
		return fmt.Errorf("%s: %w", l.Path, err)
	}
	return nil
}

// openLog opens the log at path, a file of a store, as Log.Open does.
func openLog(path string, opts convlog.ReaderOptions) (*convlog.Reader, error) {
	l, err := LooseLog(path)
	if err != nil {
		return nil, err
	}
	return l.Open(opts)
}
