package convlog

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readBytes reads a log held in memory strictly: its events and stats.
func readBytes(t testing.TB, data []byte, comp Compression) ([]Event, Stats, error) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), "mem.log", ReaderOptions{Version: -1, Compression: &comp})
	if err != nil {
		return nil, Stats{}, err
	}
	defer r.Close()
	return drain(r)
}

func copyOf(t testing.TB, p Prefix, src []byte) []byte {
	t.Helper()
	out, err := io.ReadAll(p.Reader(bytes.NewReader(src)))
	if err != nil {
		t.Fatalf("copy: %v", err)
	}
	if int64(len(out)) != p.Len() {
		t.Fatalf("copy of %d bytes, Len %d", len(out), p.Len())
	}
	return out
}

// prefixLogs is one log, plain and in three zstd frames, that the
// every-cut tests cut at each byte.
func prefixLogs() map[Compression][]byte {
	rows := []string{lTurnStart(0), lStepStart(1), lUser(2, "u1"), lAssistant(3, "a1", strings.Repeat("long answer ", 40)), lStepStart(4)}
	return map[Compression][]byte{
		Plain: plainLog(append([]string{hdrV4}, rows...)...),
		Zstd:  zlog(rows[:2], rows[2:4], rows[4:]),
	}
}

// TestCommittedPrefixEveryCut cuts logs at every byte: the committed prefix
// is where the reader puts CommittedBytes, its recovered lines are the ones
// the reader returns from a torn frame, the file and the in-memory scans
// agree, and a copy reads as the same events with no torn tail.
func TestCommittedPrefixEveryCut(t *testing.T) {
	logs := prefixLogs()
	for comp, full := range logs {
		t.Run(comp.String(), func(t *testing.T) {
			recoveredSeen := false
			for cut := 0; cut <= len(full); cut++ {
				data := full[:cut]
				p, err := CommittedPrefix(Bytes(data), int64(len(data)), comp, "s1.v4.jsonl")
				pf, errf := CommittedPrefix(bytes.NewReader(data), int64(len(data)), comp, "s1.v4.jsonl")
				if (err == nil) != (errf == nil) || p != pf {
					t.Fatalf("cut %d: bytes %+v %v, file %+v %v", cut, p, err, pf, errf)
				}
				evs, st, rerr := readBytes(t, data, comp)
				if err != nil {
					var fe *FormatError
					if !errors.As(err, &fe) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "empty or header-less log") {
						t.Fatalf("cut %d: %v", cut, err)
					}
					continue
				}
				if rerr != nil {
					t.Fatalf("cut %d: prefix %+v, but the reader fails: %v", cut, p, rerr)
				}
				if p.Bytes != st.CommittedBytes || p.Torn != st.TornTail || p.RecoveredLines != st.RecoveredLines {
					t.Fatalf("cut %d: prefix %+v, reader stats %+v", cut, p, st)
				}
				if p.RecoveredLines > 0 {
					recoveredSeen = true
				}
				cp := copyOf(t, p, data)
				if !bytes.Equal(cp[:p.Bytes], data[:p.Bytes]) {
					t.Fatalf("cut %d: the copy does not start with the committed bytes", cut)
				}
				got, cst, err := readBytes(t, cp, comp)
				if err != nil || cst.TornTail || cst.CommittedBytes != int64(len(cp)) || len(got) != len(evs) {
					t.Fatalf("cut %d: copy reads %d events (want %d), stats %+v, %v", cut, len(got), len(evs), cst, err)
				}
				for i := range got {
					if !bytes.Equal(got[i].Raw, evs[i].Raw) {
						t.Fatalf("cut %d: event %d differs in the copy", cut, i)
					}
				}
				if again, _ := CommittedPrefix(Bytes(cp), int64(len(cp)), comp, "s1.v4.jsonl"); again.Torn || again.Bytes != int64(len(cp)) {
					t.Fatalf("cut %d: the copy has a prefix %+v", cut, again)
				}
			}
			if comp == Zstd && !recoveredSeen {
				t.Error("no cut recovered lines from a torn frame")
			}
		})
	}
}

// TestCommittedPrefixRecoveredFrame: a log whose last frame is torn in its
// checksum holds all that frame's lines; a copy carries them in a frame the
// zstd tool reads, and the copy refuses to end if the torn frame changed
// after the prefix was found.
func TestCommittedPrefixRecoveredFrame(t *testing.T) {
	rows := []string{lTurnStart(0), lStepStart(1), lUser(2, "u1")}
	full := zlog(rows[:1], rows[1:])
	data := full[:len(full)-2]
	p, err := CommittedPrefix(Bytes(data), int64(len(data)), Zstd, "s1.v4.jsonl.zst")
	if err != nil || !p.Torn || p.RecoveredLines != 2 || p.RecoveredBytes != int64(len(plainLog(rows[1:]...))) {
		t.Fatalf("prefix %+v, %v", p, err)
	}
	cp := copyOf(t, p, data)
	if zstdBin, err := exec.LookPath("zstd"); err == nil {
		f := filepath.Join(t.TempDir(), "copy.zst")
		os.WriteFile(f, cp, 0o600)
		out, err := exec.Command(zstdBin, "-dc", f).Output()
		if err != nil || string(out) != string(plainLog(append([]string{hdrV4}, rows...)...)) {
			t.Fatalf("zstd -dc of the copy: %q, %v", out, err)
		}
	}
	// The runtime repairs the torn tail meanwhile: the lines are no longer
	// the ones counted.
	changed := bytes.Clone(data)
	changed[len(changed)-3] ^= 0x40
	_, err = io.ReadAll(p.Reader(bytes.NewReader(changed)))
	if err == nil || !strings.Contains(err.Error(), "changed while the log was copied") {
		t.Fatalf("copy of a changed torn frame: %v", err)
	}
	// A torn frame in a log readers refuse contributes nothing.
	bad := zlog([]string{lTurnStart(0), lTurnStart(5)}, rows[1:])
	bad = bad[:len(bad)-2]
	if p, err := CommittedPrefix(Bytes(bad), int64(len(bad)), Zstd, "s1.v4.jsonl.zst"); err != nil || p.RecoveredLines != 0 || p.Len() != p.Bytes {
		t.Fatalf("prefix of a corrupt log %+v, %v", p, err)
	}
}

func TestCommittedPrefixRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		comp Compression
		msg  string
	}{
		{"empty plain", nil, Plain, "s.log: byte 0: empty or header-less log: the first line must be a complete header line"},
		{"no newline", []byte(hdrV4), Plain, "(the file holds no complete line)"},
		{"empty zstd", nil, Zstd, "empty or header-less log: no zstd frame"},
		{"torn header frame", zframe(hdrV4 + "\n")[:20], Zstd, "s.log: frame 1 at file byte 0, plain byte 0: empty or header-less log: the header frame is torn"},
		{"foreign bytes", append(zframe(hdrV4+"\n"), "junk"...), Zstd, "invalid frame magic 0x6B6E756A"},
		{"2 TiB window", append(zframe(hdrV4+"\n"), 0x28, 0xB5, 0x2F, 0xFD, 0x00, 31<<3, 1, 0, 0), Zstd, "frame window of 2199023255552 bytes (2 TiB) exceeds the 128 MiB a log reader allows"},
		{"dictionary", append(zframe(hdrV4+"\n"), 0x28, 0xB5, 0x2F, 0xFD, 0x21, 7, 1, 0, 0), Zstd, "frame needs zstd dictionary 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CommittedPrefix(Bytes(tc.data), int64(len(tc.data)), tc.comp, "s.log")
			_, errf := CommittedPrefix(bytes.NewReader(tc.data), int64(len(tc.data)), tc.comp, "s.log")
			var fe *FormatError
			if err == nil || !errors.As(err, &fe) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.msg) || errf == nil || errf.Error() != err.Error() {
				t.Fatalf("%v / %v; want %q", err, errf, tc.msg)
			}
		})
	}
}

// TestReadPrefixEveryCut: where a strict read to the end found the whole
// log committed, ReadPrefix is exactly what CommittedPrefix of Bytes finds of
// the same bytes; where it did not (a torn line or frame, recovered
// lines), ReadPrefix declines.
func TestReadPrefixEveryCut(t *testing.T) {
	logs := prefixLogs()
	for comp, full := range logs {
		t.Run(comp.String(), func(t *testing.T) {
			whole, declined := 0, 0
			for cut := 0; cut <= len(full); cut++ {
				data := full[:cut]
				want, perr := CommittedPrefix(Bytes(data), int64(len(data)), comp, "s1.v4.jsonl")
				r, err := NewReader(bytes.NewReader(data), int64(len(data)), "s1.v4.jsonl", ReaderOptions{Version: -1, Compression: &comp})
				if err != nil {
					continue
				}
				for _, err = range r.Events() {
					// err is what ended the read: nil at the end.
				}
				got, ok := r.ReadPrefix()
				r.Close()
				if err != nil {
					continue
				}
				if !ok {
					declined++
					if perr == nil && !want.Torn && want.RecoveredLines == 0 && want.Bytes == int64(cut) {
						t.Fatalf("cut %d: declined a whole log (prefix %+v)", cut, want)
					}
					continue
				}
				whole++
				if perr != nil || got != want {
					t.Fatalf("cut %d: ReadPrefix %+v, CommittedPrefix of Bytes %+v %v", cut, got, want, perr)
				}
			}
			if whole == 0 || declined == 0 {
				t.Errorf("%d cuts whole, %d declined: want both", whole, declined)
			}
		})
	}
}
