package upgrade_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/convlog/upgrade"
	"github.com/convkit/convkit/fixtures"
)

// TestStagedSuccessorIsVerified: what writeStage writes is checked as it
// is written and read back once fsynced; a fault anywhere (a line that
// does not read as an event, a line lost, a message id changed, a stage
// file changed after it was written) fails the
// publication, naming the stage, and leaves neither a successor nor a
// temporary file.
func TestStagedSuccessorIsVerified(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		comp       convlog.Compression
		arm        func() (restore func())
	}{
		{"bad line", "staged successor failed verification", convlog.Zstd, func() func() {
			return upgrade.SetTamper(func(plain []byte, _ *int64) { plain[len(plain)/2] = 0 }, nil)
		}},
		{"bad line, plain", "staged successor failed verification", convlog.Plain, func() func() {
			return upgrade.SetTamper(func(plain []byte, _ *int64) { plain[len(plain)/2] = 0 }, nil)
		}},
		{"a line lost", "expected", convlog.Zstd, func() func() {
			return upgrade.SetTamper(func(_ []byte, events *int64) { *events++ }, nil)
		}},
		{"a message id changed", "differ from the events produced", convlog.Zstd, func() func() {
			return upgrade.SetTamper(func(plain []byte, _ *int64) {
				// The last message's id, one letter of it: the line
				// stays an event of its kind.
				if i := bytes.LastIndex(plain, []byte(`"id":"msg-`)); i >= 0 {
					plain[i+len(`"id":"msg-`)] ^= 1
				}
			}, nil)
		}},
		{"stage changed", "changed during verification", convlog.Zstd, func() func() {
			return upgrade.SetTamper(nil, func(p string) {
				f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.Write([]byte{0})
				f.Close()
			})
		}},
		{"stage changed in place", "changed during verification", convlog.Zstd, func() func() {
			return upgrade.SetTamper(nil, func(p string) {
				// One byte of the last frame, the size unchanged.
				f, err := os.OpenFile(p, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				fi, _ := f.Stat()
				b := make([]byte, 1)
				f.ReadAt(b, fi.Size()-8)
				b[0] ^= 1
				f.WriteAt(b, fi.Size()-8)
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			name := "large.v3.jsonl"
			if tc.comp == convlog.Zstd {
				name += ".zst"
			}
			src := filepath.Join(dir, name)
			if err := fixtures.LargeLog(src, 3, tc.comp, fixtures.ShortLines, 3<<20, 2); err != nil {
				t.Fatal(err)
			}
			restore := tc.arm()
			defer restore()
			_, err := upgrade.Publish(src, upgrade.PublishOptions{Children: []upgrade.ChildFact{}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("publish: %v, want an error saying %q", err, tc.want)
			}
			ents, _ := os.ReadDir(dir)
			if len(ents) != 1 {
				t.Fatalf("left in the directory: %v", ents)
			}
			// Without the fault, the same log publishes.
			restore()
			if _, err := upgrade.Publish(src, upgrade.PublishOptions{Children: []upgrade.ChildFact{}}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
