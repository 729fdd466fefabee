package convlog

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"

	"github.com/convkit/convkit/internal/durable"
)

// historicalLinesPerFrame is how many event lines WriteHistorical puts in
// one zstd frame.
const historicalLinesPerFrame = 16

// WriteHistorical publishes, without overwriting, a log of any format
// version verbatim: the header line, then lines exactly as given
// (compressed: the header as frame 1, then a frame per 16 lines). It is
// for fixtures and tests, which need logs of every version, broken ones
// included: it checks only that the header matches the file name.
func WriteHistorical(path string, h *Header, lines [][]byte, c Compression) error {
	if h.Version < 0 || h.Version > CurrentVersion {
		return fmt.Errorf("%s: format version %d is not one of 0..%d", path, h.Version, CurrentVersion)
	}
	n, ok := ParseName(filepath.Base(path))
	if !ok {
		return fmt.Errorf("%s: not a log file name (<base>[.vN].jsonl[.zst])", path)
	}
	if n.Version != h.Version {
		return fmt.Errorf("%s: file name identifies v%d, but the header identifies v%d", path, n.Version, h.Version)
	}
	if n.Compression != c {
		return fmt.Errorf("%s: file name says compression %s, but %s was asked for", path, n.Compression, c)
	}
	dir := filepath.Dir(path)
	if err := durable.MkdirAll(dir); err != nil {
		return err
	}
	tmp, err := durable.CreateTemp(dir, "."+filepath.Base(path))
	if err != nil {
		return err
	}
	if err := writeHistorical(tmp, h, lines, c); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("%s: %w", path, err)
	}
	return durable.Publish(tmp, path)
}

func writeHistorical(f *os.File, h *Header, lines [][]byte, c Compression) error {
	bw := bufio.NewWriterSize(f, 256<<10)
	head := append(h.AppendJSON(nil), '\n')
	if c == Plain {
		bw.Write(head)
		for _, l := range lines {
			bw.Write(l)
			if err := bw.WriteByte('\n'); err != nil {
				return err
			}
		}
		return bw.Flush()
	}
	frame := encodeFrame(nil, head)
	if _, err := bw.Write(frame); err != nil {
		return err
	}
	var plain []byte
	for i := 0; i < len(lines); i += historicalLinesPerFrame {
		plain = plain[:0]
		for _, l := range lines[i:min(i+historicalLinesPerFrame, len(lines))] {
			plain = append(append(plain, l...), '\n')
		}
		frame = encodeFrame(frame[:0], plain)
		if _, err := bw.Write(frame); err != nil {
			return err
		}
	}
	return bw.Flush()
}
