package transfer

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/convkit/convkit/store"
)

// TestManifestEncodedAsItGrows: the manifest export assembles from the
// conversations and files encoded as it added them is byte for byte the
// one archive.WriteManifest encodes whole, strings to escape, the members'
// own text inside strings and an export of nothing included.
func TestManifestEncodedAsItGrows(t *testing.T) {
	var m Manifest
	if err := json.Unmarshal(sampleManifest(t), &m); err != nil {
		t.Fatal(err)
	}
	tricky := `<a> & "b" \ ` + "\u2028\x01 " + `"conversations":[],"files":[]`
	m.Online, m.Holder = true, &store.Holder{PID: 7, Command: tricky}
	m.Conversations[0].Title, m.Files[1].Name = tricky, tricky
	whole := func(m *Manifest) []byte {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	var p manifestParts
	if err := p.add(&m.Conversations[0], m.Files[:2]); err != nil {
		t.Fatal(err)
	}
	if err := p.add(&m.Conversations[1], m.Files[2:]); err != nil {
		t.Fatal(err)
	}
	if got, err := p.manifest(&m); err != nil || !bytes.Equal(got, whole(&m)) {
		t.Fatalf("%v\n%s\nwant\n%s", err, got, whole(&m))
	}
	m.Conversations, m.Files = []Conversation{}, []File{}
	var none manifestParts
	if got, err := none.manifest(&m); err != nil || !bytes.Equal(got, whole(&m)) {
		t.Fatalf("%v\n%s\nwant\n%s", err, got, whole(&m))
	}
}
