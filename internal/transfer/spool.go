package transfer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/durable"
)

// msgSpool keeps the message text the strict reads of an import collect
// for the index (reindex.Preread): up to memory bytes in memory, the
// rest in one file of the staging directory (outside the tree that
// becomes the store, made when first needed), so that memory does not
// grow with the text of the archive. The file goes with the staging
// directory.
type msgSpool struct {
	dir    string
	memory int
	mu     sync.Mutex
	// mem are chunks of spoolChunk bytes, filled in turn; records that do
	// not fit in one go to the file.
	mem [][]byte
	f   *os.File
	end int64
	err error
}

// defaultSpoolMemory is how much message text an import keeps in memory
// for its index before it spools the rest to a file, in chunks of
// spoolChunk.
const defaultSpoolMemory = 8 << 20

const spoolChunk = 512 << 10

// newMsgSpool starts a spool in dir that keeps up to memory bytes in
// memory (0: defaultSpoolMemory).
func newMsgSpool(dir string, memory int) *msgSpool {
	if memory <= 0 {
		memory = defaultSpoolMemory
	}
	return &msgSpool{dir: dir, memory: memory}
}

// write stores b and says where: in memory chunk chunk at off, or in the
// file at off (chunk -1).
func (s *msgSpool) write(b []byte) (chunk int, off int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return -1, 0, s.err
	}
	if len(b) <= spoolChunk {
		n := len(s.mem)
		if n == 0 || len(s.mem[n-1])+len(b) > spoolChunk {
			if (n+1)*spoolChunk <= s.memory {
				s.mem = append(s.mem, make([]byte, 0, spoolChunk))
				n++
			}
		}
		if n > 0 && len(s.mem[n-1])+len(b) <= spoolChunk {
			off = int64(len(s.mem[n-1]))
			s.mem[n-1] = append(s.mem[n-1], b...)
			return n - 1, off, nil
		}
	}
	if s.f == nil {
		if s.f, s.err = durable.CreateExcl(filepath.Join(s.dir, "messages.spool")); s.err != nil {
			return -1, 0, s.err
		}
	}
	off = s.end
	if _, s.err = s.f.WriteAt(b, off); s.err != nil {
		return -1, 0, s.err
	}
	s.end += int64(len(b))
	return -1, off, nil
}

// put appends the messages of one session (all of one session id) and
// returns what loads them back.
func (s *msgSpool) put(msgs []index.Message) (func() ([]index.Message, error), error) {
	if len(msgs) == 0 {
		return func() ([]index.Message, error) { return nil, nil }, nil
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
	chunk, off, err := s.write(b)
	if err != nil {
		return nil, err
	}
	n := len(b)
	return func() ([]index.Message, error) { return s.get(sessionID, chunk, off, n) }, nil
}

var errSpool = errors.New("message spool: malformed record")

// get reads back the record of n bytes at off (of a chunk in memory, or
// of the file: chunk -1).
func (s *msgSpool) get(sessionID string, chunk int, off int64, n int) ([]index.Message, error) {
	var b []byte
	if chunk >= 0 {
		s.mu.Lock()
		b = s.mem[chunk][off : off+int64(n)]
		s.mu.Unlock()
	} else {
		b = make([]byte, n)
		if _, err := s.f.ReadAt(b, off); err != nil {
			return nil, fmt.Errorf("message spool: %w", err)
		}
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
	if s != nil && s.f != nil {
		s.f.Close()
	}
}
