package hostile

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// Builders of hostile logs. A session log here is a header line and six
// events, one small turn, every line of which the format v4 reader accepts.

const hostileCwd = "/home/dev/src/hostile"

func sessionHeader(id string, version int) string {
	return fmt.Sprintf(`{"type":"session","version":%d,"id":%q,"createdAt":1790000000000,"cwd":%q,"isSeeded":false,"delegationDepth":0}`,
		version, id, hostileCwd)
}

func evTurnStart(seq int) string {
	return fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":1790000000001,"data":{"turn":1}}`, seq)
}

func evStepStart(seq int) string {
	return fmt.Sprintf(`{"type":"step/start","seq":%d,"time":1790000000002,"data":{"turn":1,"step":1}}`, seq)
}

func evUser(seq int, text string) string {
	return fmt.Sprintf(`{"type":"user/message","seq":%d,"time":1790000000003,"data":{"content":[{"type":"text","text":%q}],"source":{"kind":"user"},"role":"user","id":"u%d"},"surfaceOp":"append"}`,
		seq, text, seq)
}

func evAssistant(seq int, text string) string {
	return fmt.Sprintf(`{"type":"assistant/message","seq":%d,"time":1790000000004,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":%q}],"source":{"kind":"model","provider":"p","model":"deepseek-pro"},"id":"a%d"},"stream":[]},"surfaceOp":"append"}`,
		seq, text, seq)
}

func evStepEnd(seq int) string {
	return fmt.Sprintf(`{"type":"step/end","seq":%d,"time":1790000000005,"data":{"turn":1,"step":1}}`, seq)
}

func evTurnEnd(seq int) string {
	return fmt.Sprintf(`{"type":"turn/end","seq":%d,"time":1790000000006,"data":{"turn":1,"reason":{"kind":"completed"}}}`, seq)
}

// sessionEvents are the six events of a good session log, seqs 0 to 5.
func sessionEvents() []string {
	return []string{evTurnStart(0), evStepStart(1), evUser(2, "List the files"), evAssistant(3, "README.md and go.mod"),
		evStepEnd(4), evTurnEnd(5)}
}

// joinLines joins lines, each ending with a newline.
func joinLines(lines ...string) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// plainSession is a good plain v4 session log of session id.
func plainSession(id string) []byte {
	return joinLines(append([]string{sessionHeader(id, 4)}, sessionEvents()...)...)
}

// offsetOfLine is the byte offset of line n (1-based) in the plain text.
func offsetOfLine(plain []byte, n int) int {
	off := 0
	for i := 1; i < n; i++ {
		off += bytes.IndexByte(plain[off:], '\n') + 1
	}
	return off
}

// zframe is one standard zstd frame with a content checksum.
func zframe(t testing.TB, plain []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(plain, nil)
}

// zlog is a compressed session log: frame 1 the header line, then one
// frame per batch of event lines. It returns the frames separately so that
// cases can damage one and know where each starts.
func zlog(t testing.TB, id string, batches ...[]string) [][]byte {
	t.Helper()
	frames := [][]byte{zframe(t, joinLines(sessionHeader(id, 4)))}
	for _, b := range batches {
		frames = append(frames, zframe(t, joinLines(b...)))
	}
	return frames
}

// zbatches splits the good events into three batches (three frames after
// the header frame).
func zbatches() [][]string {
	evs := sessionEvents()
	return [][]string{evs[:2], evs[2:4], evs[4:]}
}

// zplainAt is the plain-text offset where frame i (0-based; 0 is the
// header frame) of zlog(t, hostileSID, zbatches()...) begins: problems
// with a whole frame name it.
func zplainAt(i int) string {
	n := len(joinLines(sessionHeader(hostileSID, 4)))
	if i == 0 {
		n = 0
	}
	for _, b := range zbatches()[:max(i-1, 0)] {
		n += len(joinLines(b...))
	}
	return fmt.Sprint(n)
}

// frameAt is the file offset of frame i (0-based) of frames.
func frameAt(frames [][]byte, i int) int {
	off := 0
	for _, f := range frames[:i] {
		off += len(f)
	}
	return off
}

// readLines reads a plain log as lines (without their newlines).
func readLines(t testing.TB, p string) []string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// writeHugeLine writes a plain v4 session log whose third line is one event
// of size bytes, streaming: the line is never held in memory.
func writeHugeLine(t testing.TB, p, id string, size int) (lineOffset int) {
	t.Helper()
	fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	head := joinLines(sessionHeader(id, 4), evTurnStart(0))
	prefix := `{"type":"step/start","seq":1,"time":1790000000002,"data":{"turn":1,"step":1,"pad":"`
	suffix := "\"}}\n"
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	_, err = fh.Write(append(head, prefix...))
	for n := size - len(prefix) - len(suffix); n > 0 && err == nil; n -= len(chunk) {
		_, err = fh.Write(chunk[:min(n, len(chunk))])
	}
	if err == nil {
		_, err = fh.Write([]byte(suffix + evUser(2, "after the long line") + "\n"))
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(head)
}
