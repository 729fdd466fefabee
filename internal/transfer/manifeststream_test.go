package transfer

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/convkit/convkit/store"
)

// sampleManifest is a manifest as export writes it.
func sampleManifest(t testing.TB) []byte {
	m := Manifest{ManifestHeader: manifestFormat.Header("test", time.Unix(1_800_000_000, 0)), Requested: []string{"a", "b"},
		Conversations: []Conversation{
			{ID: "a", Dir: "a", Title: "first", Cwd: "/src/a", Agents: []string{"coder"}, Models: []string{"m"}, DependsOn: []string{}, Requested: true, AncestorOf: []string{}, Sessions: 2},
			{ID: "b", Dir: "b", Title: "fork", Cwd: "/src/b", ForkedFrom: "a", AfterCompaction: true, DependsOn: []string{"a"}, AncestorOf: []string{}, Sessions: 1},
		},
		Files: []File{
			{Name: "conversations/a/metadata.v4.jsonl.zst", Conversation: "a", Version: 4, Size: 100, SHA256: strings.Repeat("ab", 32), Committed: 100, Events: 3},
			{Name: "conversations/a/s1.v4.jsonl", Conversation: "a", Session: "s1", Version: 4, Size: 50, SHA256: strings.Repeat("cd", 32), Committed: 50, Events: 7, LeftOut: 4},
			{Name: "conversations/b/metadata.v4.jsonl", Conversation: "b", Version: 4, Size: 9, SHA256: strings.Repeat("ef", 32), Committed: 8, Events: 1},
		},
		Problems: []store.Item{{ID: "c", Path: "/x", Reason: "unreadable"}},
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sameAsDecode checks the stream's result against the whole-value
// decoder's (decodeManifest, which Verify uses): whenever the stream
// keeps a manifest whose header Verify accepts, the decoder accepts it and
// finds the same manifest, listing and checks. It reports whether the
// stream kept it.
func sameAsDecode(t *testing.T, data []byte) bool {
	t.Helper()
	vm, listed, ok := decodeManifestStream(bytes.NewReader(data))
	if !ok {
		return false
	}
	h := vm.m.ManifestHeader
	if h.Format != manifestFormat.Name || h.FormatVersion < 1 || h.FormatVersion > manifestFormat.Version {
		return false
	}
	m, err := decodeManifest(bytes.NewReader(data), "MANIFEST.json")
	if err != nil {
		t.Fatalf("the stream kept a manifest the decoder refuses (%v):\n%q", err, data)
	}
	want := &verifiedManifest{files: map[string]fileCheck{}}
	for i := range m.Files {
		want.add(&m.Files[i])
	}
	if wl := m.Listing(); !reflect.DeepEqual(listed, wl) && (len(listed) > 0 || len(wl) > 0) {
		t.Fatalf("listing\nstream %+v\ndecode %+v\nof %q", listed, wl, data)
	}
	m.Files = nil
	if !reflect.DeepEqual(vm.m, m) || !reflect.DeepEqual(vm.files, want.files) || vm.uncommitted != want.uncommitted {
		t.Fatalf("manifest\nstream %+v %+v %q\ndecode %+v %+v %q\nof %q", vm.m, vm.files, vm.uncommitted, m, want.files, want.uncommitted, data)
	}
	return true
}

// TestManifestStream: the streamed manifest is the decoded one, and
// every manifest the stream does not read plainly is left to the decoder.
func TestManifestStream(t *testing.T) {
	sample := sampleManifest(t)
	if !sameAsDecode(t, sample) {
		t.Fatal("the stream did not read a manifest as export writes it")
	}
	s := string(sample)
	for _, c := range []struct {
		name, data string
		streamed   bool
	}{
		{"unknown members", strings.Replace(s, `{"format"`, `{"future":{"x":[1,2]},"format"`, 1), true},
		{"escaped member name", strings.Replace(s, `"files"`, `"\u0066iles"`, 1), true},
		{"no files", strings.Replace(strings.Replace(s, `"files"`, `"nofiles"`, 1), `"conversations"`, `"noconversations"`, 1), true},
		{"trailing text", s + "garbage", true},
		{"a member in another case", strings.Replace(s, `"files"`, `"Files"`, 1), false},
		{"a member in a folded case", strings.Replace(s, `"files"`, `"file\u017f"`, 1), false},
		{"files twice", strings.Replace(s, `"problems"`, `"files":[],"problems"`, 1), false},
		{"files null", strings.Replace(strings.Replace(s, `"files":[`, `"files":null,"x":[`, 1), `"problems"`, `"y":1,"problems"`, 1), false},
		{"conversations not an array", strings.Replace(s, `"conversations":[`, `"conversations":{"a":[`, 1), false},
		{"a field of another type", strings.Replace(s, `"size":100`, `"size":"100"`, 1), false},
		{"truncated", s[:len(s)/2], false},
		{"not an object", `[1,2]`, false},
		{"another format", strings.Replace(s, "convkit-export", "convkit-backup", 1), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := sameAsDecode(t, []byte(c.data)); got != c.streamed {
				t.Fatalf("streamed %v, want %v", got, c.streamed)
			}
		})
	}
}

// FuzzManifestStream: on any input, a manifest the stream keeps is the one
// the whole-value decoder finds.
func FuzzManifestStream(f *testing.F) {
	sample := sampleManifest(f)
	f.Add(sample)
	f.Add([]byte(strings.Replace(string(sample), `"files"`, `"Files"`, 1)))
	f.Add([]byte(`{"format":"convkit-export","formatVersion":1,"files":[{"name":"x","size":1}],"files":[]}`))
	f.Add([]byte(`{"format":"convkit-export","formatVersion":1,"conversations":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsDecode(t, data)
	})
}
