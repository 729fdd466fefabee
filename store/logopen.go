package store

import (
	"fmt"
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
// refused when it is opened, with a *convlog.IdentityError: every reader
// of a store's logs opens them through OpenLog (or Log.Open), so no caller
// decides the check again, or forgets it.

// LogIdentity is the header type (convlog.ConversationLog or
// convlog.SessionLog) and id that the place of the log at path implies:
// path ends in <conversation directory>/<log generation name>, in a store
// or in a tree laid out as one (a staged archive, a snapshot of a log).
func LogIdentity(path string) (typ, id string, err error) {
	n, ok := convlog.ParseName(filepath.Base(path))
	if !ok {
		return "", "", fmt.Errorf("%s: not a log file name (<base>[.vN].jsonl[.zst])", path)
	}
	if n.Base == ConversationLogBase {
		id, err := DecodeSegment(filepath.Base(filepath.Dir(path)))
		if err != nil {
			return "", "", fmt.Errorf("%s: not in a conversation directory: %w", path, err)
		}
		return convlog.ConversationLog, id, nil
	}
	id, err = DecodeBase(n.Base)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", path, err)
	}
	return convlog.SessionLog, id, nil
}

// LogReaderOptions is opts with WantType and WantID set to the identity
// the place of the log at path implies (LogIdentity). Readers that read a
// log through a descriptor of their own (convlog.OpenFile, then
// convlog.NewReader over the committed prefix) take their options from it;
// everyone else calls OpenLog.
func LogReaderOptions(path string, opts convlog.ReaderOptions) (convlog.ReaderOptions, error) {
	typ, id, err := LogIdentity(path)
	if err != nil {
		return opts, err
	}
	opts.WantType, opts.WantID = typ, id
	return opts, nil
}

// OpenLog opens the log at path, a log of a store, for reading: as
// convlog.Open opens every log (never through a symbolic link, never
// blocking, a regular file only), with the identity its place implies
// checked on its header (LogReaderOptions). A header of another log is
// refused with a *convlog.IdentityError naming path.
func OpenLog(path string, opts convlog.ReaderOptions) (*convlog.Reader, error) {
	opts, err := LogReaderOptions(path, opts)
	if err != nil {
		return nil, err
	}
	return convlog.Open(path, opts)
}

// CheckLogHeader refuses h, the header of the log at path, unless it names
// the log path's place implies: for readers that get the header another
// way (the upgrade chain reads the source itself).
func CheckLogHeader(path string, h *convlog.Header) error {
	typ, id, err := LogIdentity(path)
	if err != nil {
		return err
	}
	if err := convlog.CheckIdentity(h, typ, id); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Open opens the log's current generation as OpenLog does.
func (l Log) Open(opts convlog.ReaderOptions) (*convlog.Reader, error) { return OpenLog(l.Path, opts) }
