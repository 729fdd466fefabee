package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/convkit/convkit/convlog"
)

func TestResolveIDs(t *testing.T) {
	dir := t.TempDir()
	s := at(dir)
	ids := []string{
		"0f7186fa-c74c-4bb0-9bd8-4ca3eb3f387b",
		"0f71aaaa-0000-4000-8000-000000000000",
		"6b228548-a777-414c-9eac-99d30e789076",
		"6b22",              // a whole id that is a prefix of another
		"team/α β ~1 ../x",  // escaped on disk
		"αβγδ-conversation", // four characters, eight bytes
	}
	for _, id := range ids {
		p, err := conversationPath(dir, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// Not conversations: a file, a symbolic link to a directory, a name
	// that is no canonical encoding.
	conv := ConversationsDir(dir)
	os.WriteFile(filepath.Join(conv, "9abcdef0-file"), nil, 0o600)
	os.Symlink(filepath.Join(conv, ids[0]), filepath.Join(conv, "9abcdef1-link"))
	os.Mkdir(filepath.Join(conv, "9abcdef2~zz"), 0o700)

	tests := []struct {
		ref, want string
	}{
		{"0f7186fa", ids[0]}, // unique prefix
		{"0f7186fa-c74c", ids[0]},
		{ids[0], ids[0]}, // whole id
		{"6b22", "6b22"}, // a whole id wins over the longer one it starts
		{"6b228", ids[2]},
		{"team", ids[4]}, // prefix of an escaped id
		{"team/α β ~1 ../x", ids[4]},
		{"αβγδ", ids[5]}, // four characters, however many bytes
		{"0f7", "0f7"},   // too short to be a prefix: as given
		{"αβγ", "αβγ"},
		{"ffff", "ffff"},         // names nothing: as given
		{"9abcdef0", "9abcdef0"}, // a file is no conversation
		{"9abcdef1", "9abcdef1"}, // nor a link
		{"9abcdef2", "9abcdef2"}, // nor a noncanonical name
	}
	for _, tt := range tests {
		got, err := s.ResolveID(tt.ref)
		if err != nil || got != tt.want {
			t.Errorf("ResolveID(%q) = %q, %v; want %q", tt.ref, got, err, tt.want)
		}
	}

	_, err := s.ResolveID("0f71")
	var amb *AmbiguousIDError
	if !errors.As(err, &amb) || amb.prefix != "0f71" || !slices.Equal(amb.candidates, ids[:2]) {
		t.Fatalf("ResolveID(0f71) = %v, want an ambiguity naming both", err)
	}
	if want := `"0f71" names more than one conversation: "` + ids[0] + `", "` + ids[1] + `"`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}

	got, err := s.ResolveIDs([]string{"0f7186fa", "6b228", "ffff"})
	if err != nil || !slices.Equal(got, []string{ids[0], ids[2], "ffff"}) {
		t.Errorf("ResolveIDs = %q, %v", got, err)
	}
	if _, err := s.ResolveIDs([]string{"6b228", "0f71"}); !errors.As(err, &amb) {
		t.Errorf("ResolveIDs with one ambiguous prefix: %v", err)
	}

	// A store without conversations: every ref as given.
	empty := at(t.TempDir())
	if got, err := empty.ResolveID("0f7186fa"); err != nil || got != "0f7186fa" {
		t.Errorf("empty store: %q, %v", got, err)
	}
	// A conversations entry that is not a directory: the store is broken.
	broken := t.TempDir()
	os.WriteFile(filepath.Join(broken, ConversationsDirName), nil, 0o600)
	if _, err := at(broken).ResolveID("0f7186fa"); !errors.Is(err, ErrConversationsDir) {
		t.Errorf("broken store: %v, want ErrConversationsDir", err)
	}
}

func TestAmbiguousIDErrorBounded(t *testing.T) {
	var c []string
	for i := range 12 {
		c = append(c, "abcd-"+string(rune('a'+i)))
	}
	want := `"abcd" names more than one conversation: "abcd-a", "abcd-b", "abcd-c", "abcd-d", "abcd-e", "abcd-f", "abcd-g", "abcd-h", "abcd-i", "abcd-j", and 2 more`
	if got := (&AmbiguousIDError{prefix: "abcd", candidates: c}).Error(); got != want {
		t.Errorf("%q\nwant %q", got, want)
	}
}

// TestResolveSessionID: a session is named by a unique prefix of its id
// among its conversation's session logs.
func TestResolveSessionID(t *testing.T) {
	dir := t.TempDir()
	s := at(dir)
	p, err := conversationPath(dir, "c1")
	mustNil(t, err)
	mustNil(t, os.MkdirAll(p, 0o700))
	for _, name := range []string{"metadata.v4.jsonl", "5af155a0-aaaa.v4.jsonl", "5af1bbbb.v4.jsonl", "783fe8fb.v4.jsonl", "783f.v3.jsonl"} {
		mustNil(t, os.WriteFile(filepath.Join(p, name), nil, 0o600))
	}
	for _, tt := range []struct{ ref, want string }{
		{"5af155", "5af155a0-aaaa"}, {"5af1bbbb", "5af1bbbb"}, {"783f", "783f"}, {"783fe", "783fe8fb"},
		{"abc", "abc"}, {"ffff", "ffff"}, {"meta", "meta"}, // the conversation log is no session
	} {
		if got, err := s.ResolveSessionID("c1", tt.ref); err != nil || got != tt.want {
			t.Errorf("ResolveSessionID(c1, %q) = %q, %v; want %q", tt.ref, got, err, tt.want)
		}
	}
	_, err = s.ResolveSessionID("c1", "5af1")
	want := `"5af1" names more than one session of conversation "c1": "5af155a0-aaaa", "5af1bbbb"`
	if !errors.As(err, new(*AmbiguousIDError)) || err.Error() != want {
		t.Errorf("ResolveSessionID(c1, 5af1) = %v, want %s", err, want)
	}
	if got, err := s.ResolveSessionID("nope", "5af1"); err != nil || got != "5af1" {
		t.Errorf("no such conversation: %q, %v", got, err)
	}
}

// TestResolveIDsDeleted: a prefix that names no conversation of the store
// names one a recent delete removed, so that the delete run again by the
// same prefix finishes as "already deleted".
func TestResolveIDsDeleted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	for _, id := range []string{"aaaa-1111", "aaaa-2222", "bbbb-1111"} {
		mustNil(t, s.CreateConversation(id, "/p", nil, nil))
	}
	mustNil(t, s.DeleteAll(ctx, []string{"aaaa-1111", "bbbb-1111"}, DeleteOptions{}))
	for _, tt := range []struct{ ref, want string }{
		{"aaaa", "aaaa-2222"}, // the one in the store
		{"bbbb", "bbbb-1111"}, // gone, named by the journal
		{"aaaa-1", "aaaa-1111"},
		{"cccc", "cccc"},
	} {
		if got, err := s.ResolveID(tt.ref); err != nil || got != tt.want {
			t.Errorf("ResolveID(%q) = %q, %v; want %q", tt.ref, got, err, tt.want)
		}
	}
	var got []string
	mustNil(t, s.DeleteAll(ctx, []string{"bbbb-1111"}, DeleteOptions{Done: func(id string, already bool) error {
		if already {
			got = append(got, id)
		}
		return nil
	}}))
	if len(got) != 1 {
		t.Errorf("the rerun by the resolved id: already deleted %q", got)
	}
}
