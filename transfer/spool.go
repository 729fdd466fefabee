package transfer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/convkit/convkit/durable"
	"github.com/convkit/convkit/index"
)

// msgSpool keeps the message text the strict reads of an import collect
// for the index (reindex.Preread) in one file of the staging directory,
// outside the tree that becomes the store, so that memory does not grow
// with the text of the archive. It goes with the staging directory.
type msgSpool struct {
	mu  sync.Mutex
	f   *os.File
	end int64
	err error
}

func newMsgSpool(dir string) (*msgSpool, error) {
	f, err := durable.CreateExcl(filepath.Join(dir, "messages.spool"))
	if err != nil {
		return nil, err
	}
	return &msgSpool{f: f}, nil
}

// put appends the messages of one session (all of one session id) and
// returns what loads them back.
func (s *msgSpool) put(msgs []index.Message) (func() ([]index.Message, error), error) {
	if len(msgs) == 0 {
		return func() ([]index.Message, error) {
			prereadsTaken.Add(1)
			return nil, nil
		}, nil
	}
	sessionID := msgs[0].SessionID
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(msgs)))
	for _, m := range msgs {
		b = binary.AppendVarint(b, m.Seq)
		b = binary.AppendUvarint(b, uint64(len(m.Role)))
		b = append(b, m.Role...)
		b = binary.AppendUvarint(b, uint64(len(m.Text)))
		b = append(b, m.Text...)
	}
	s.mu.Lock()
	off := s.end
	if s.err == nil {
		_, s.err = s.f.WriteAt(b, off)
		s.end += int64(len(b))
	}
	err := s.err
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	n := len(b)
	return func() ([]index.Message, error) {
		prereadsTaken.Add(1)
		return s.get(sessionID, off, n)
	}, nil
}

// prereadsTaken counts the session logs indexed from their strict read
// (for tests: that the index build did not read them again).
var prereadsTaken atomic.Int64

var errSpool = errors.New("message spool: malformed record")

// get reads back the record of n bytes at off.
func (s *msgSpool) get(sessionID string, off int64, n int) ([]index.Message, error) {
	b := make([]byte, n)
	if _, err := s.f.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("message spool: %w", err)
	}
	count, k := binary.Uvarint(b)
	if k <= 0 || count > uint64(n) {
		return nil, errSpool
	}
	b = b[k:]
	msgs := make([]index.Message, 0, count)
	str := func() (string, bool) {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return "", false
		}
		v := string(b[k : k+int(l)])
		b = b[k+int(l):]
		return v, true
	}
	for range count {
		seq, k := binary.Varint(b)
		if k <= 0 {
			return nil, errSpool
		}
		b = b[k:]
		role, ok1 := str()
		text, ok2 := str()
		if !ok1 || !ok2 {
			return nil, errSpool
		}
		msgs = append(msgs, index.Message{SessionID: sessionID, Seq: seq, Role: role, Text: text})
	}
	if len(b) != 0 {
		return nil, errSpool
	}
	return msgs, nil
}

func (s *msgSpool) close() {
	if s != nil {
		s.f.Close()
	}
}
