package reindex

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/convkit/convkit/store"
)

// A conversation's fingerprint is a digest of the stat identity of each of
// its current logs: name, size, modification time, change time, device
// and inode (the identity the runtime's own upgrade uses to tell that a
// log changed, DSH's dev:ino:size:mtimeNs:ctimeNs). Logs are append-only:
// an append changes size, mtime and ctime; a rewrite, a copy or a move of
// another file into place changes the inode or the ctime, which no
// program can set back (utimes sets mtime and atime, and moves ctime to
// now). A log changed in place with its size kept and the clock set back
// is the one change it misses. An incremental reindex keeps a row whose
// fingerprint matches, so every reader of the index relies on it.
//
// The fingerprint is taken before the logs are read: a log that changes
// while it is read leaves a fingerprint older than the row, which the next
// comparison finds changed, never the other way round.

// dirFingerprint is the fingerprint of the conversation's current logs,
// from an lstat of each (the conversation log first, then the sessions in
// the walk's order).
func dirFingerprint(c store.ConversationDir) string {
	fp, _ := dirFingerprintSize(c)
	return fp
}

// dirFingerprintSize is dirFingerprint and the size of the logs it
// stated.
func dirFingerprintSize(c store.ConversationDir) (string, int64) {
	fp := sha256.New()
	var size int64
	for _, l := range c.Logs {
		if l.IsConversationLog {
			size += fingerprint(fp, l.Path)
		}
	}
	for _, l := range c.Logs {
		if !l.IsConversationLog {
			size += fingerprint(fp, l.Path)
		}
	}
	return hex.EncodeToString(fp.Sum(nil))[:32], size
}

// fingerprint adds one log's line and returns its size. A log that cannot
// be stated adds its name alone: the read that follows fails and the
// conversation is skipped, or it is gone and the next walk does not list
// it.
func fingerprint(h io.Writer, path string) (size int64) {
	var b [160]byte
	line := append(b[:0], filepath.Base(path)...)
	if fi, err := os.Lstat(path); err == nil {
		size = fi.Size()
		line = append(line, 0)
		line = strconv.AppendInt(line, fi.Size(), 10)
		line = append(line, 0)
		line = strconv.AppendInt(line, fi.ModTime().UnixNano(), 10)
		if ctime, dev, ino, ok := statIdentity(fi); ok {
			line = append(line, 0)
			line = strconv.AppendInt(line, ctime, 10)
			line = append(line, 0)
			line = strconv.AppendUint(line, dev, 10)
			line = append(line, 0)
			line = strconv.AppendUint(line, ino, 10)
		}
	}
	line = append(line, '\n')
	h.Write(line)
	return size
}

// logIdentity is the identity of the conversation log of c alone: a
// digest of its line of the fingerprint. What listing reads comes from the
// conversation log only, so a row whose log identity matches lists as
// current while a running turn's session log grows.
func logIdentity(c store.ConversationDir) string {
	for _, l := range c.Logs {
		if l.IsConversationLog {
			return logIdentityOf(l.Path)
		}
	}
	return ""
}

// logIdentityOf is logIdentity of the conversation log at path.
func logIdentityOf(path string) string {
	h := sha256.New()
	fingerprint(h, path)
	return hex.EncodeToString(h.Sum(nil))[:32]
}
