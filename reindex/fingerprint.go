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

// A conversation's fingerprint digests each current log's name, size, mtime,
// ctime, device and inode: an append, rewrite or move changes one, and ctime
// cannot be set back. It is taken before the logs are read, so a change
// meanwhile is found next time.

// dirFingerprint is the fingerprint of c's current logs.
func dirFingerprint(c store.ConversationDir) string {
	fp, _, _ := dirFingerprintSize(c)
	return fp
}

// dirFingerprintSize is dirFingerprint, logIdentity from the same stat (so
// both date from before the logs are read, and agree), and the size of the
// logs it stated.
func dirFingerprintSize(c store.ConversationDir) (fp, logID string, size int64) {
	h := sha256.New()
	for i, l := range c.Logs { // the conversation log first
		if i == 0 && l.IsConversationLog {
			id := sha256.New()
			size += fingerprint(h, id, l.Path)
			logID = hex.EncodeToString(id.Sum(nil))[:32]
			continue
		}
		size += fingerprint(h, nil, l.Path)
	}
	return hex.EncodeToString(h.Sum(nil))[:32], logID, size
}

// fingerprint adds one log's line (its name alone if unstated) to h and to
// id (nil: none), returns its size.
func fingerprint(h, id io.Writer, path string) (size int64) {
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
	if id != nil {
		id.Write(line)
	}
	return size
}

// logIdentity is the conversation log's line of the fingerprint: listing reads only that log.
func logIdentity(c store.ConversationDir) string {
	l := c.ConversationLog()
	if l == nil {
		return ""
	}
	h := sha256.New()
	fingerprint(h, nil, l.Path)
	return hex.EncodeToString(h.Sum(nil))[:32]
}
