package reindex

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/convkit/convkit/index"
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

// Vouched is what metadata.db holds of conversations: rows written from a
// strict read of their logs (a rebuild) or by the writer of their bytes (a
// Keeper), which vouch for those logs while they keep the fingerprint.
type Vouched map[string]*index.Conversation

// LoadVouched reads the rows of conversations ids; nil when metadata.db is
// missing or unusable.
func LoadVouched(ctx context.Context, s *store.Store, ids []string) Vouched {
	db, err := index.OpenRead(ctx, s.IndexPath(), index.ReadOptions{})
	if err != nil {
		return nil
	}
	defer db.Close()
	rows, err := db.Fingerprints(ctx, ids)
	if err != nil {
		return nil
	}
	return rows
}

// Sessions are the session rows of c by log file name, nil unless c's
// current logs keep the fingerprint of its row; take it before reading them.
func (v Vouched) Sessions(c store.ConversationDir) map[string]index.Session {
	row := v[c.ID]
	if row == nil || row.Fingerprint != dirFingerprint(c) {
		return nil
	}
	out := make(map[string]index.Session, len(row.Sessions))
	for _, s := range row.Sessions {
		out[s.File] = s
	}
	return out
}
