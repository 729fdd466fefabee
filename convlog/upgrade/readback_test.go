package upgrade

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestReadBack reads a stage back as Staged.Publish and sameStagedPrefix
// do: any byte changed, in any write, and a file shorter or longer than
// the stage are seen, with the bytes the file holds.
func TestReadBack(t *testing.T) {
	st, err := newStaged()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var all []byte
	for i := 0; i < 12; i++ {
		b := make([]byte, 700<<10+rng.IntN(900<<10))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		st.add(b)
		all = append(all, b...)
	}
	path := filepath.Join(t.TempDir(), "stage")
	check := func(name string, content []byte, toEOF bool, wantN int64, wantSame bool) {
		t.Helper()
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		n, same, err := st.readBack(path, toEOF)
		if err != nil || n != wantN || same != wantSame {
			t.Errorf("%s: read back %d bytes, same %v (%v); want %d, %v", name, n, same, err, wantN, wantSame)
		}
	}
	size := int64(len(all))
	check("the stage", all, true, size, true)
	for _, at := range []int64{3, size / 3, size/2 + 17, size - 1} {
		changed := bytes.Clone(all)
		changed[at] ^= 0x20
		check("a byte changed", changed, true, size, false)
	}
	check("cut in the first half", all[:size/4], true, size/4, false)
	check("cut in the second half", all[:size-5], true, size-5, false)
	longer := append(bytes.Clone(all), "tail"...)
	check("longer", longer, true, size+4, false)
	check("longer, as a prefix", longer, false, size, true)
}
