package store

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/convkit/convkit/convlog"
)

func TestResolveDataDir(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		flag    string
		env     map[string]string
		home    string
		want    string
		wantErr bool
	}{
		{name: "flag wins", flag: "/f", env: map[string]string{dataDirEnv: "/e", xdgDataHomeEnv: "/x"}, home: "/h", want: "/f"},
		{name: "env", env: map[string]string{dataDirEnv: "/e", xdgDataHomeEnv: "/x"}, home: "/h", want: "/e"},
		{name: "xdg", env: map[string]string{xdgDataHomeEnv: "/x"}, home: "/h", want: "/x/convkit"},
		{name: "home", home: "/h", want: "/h/.local/share/convkit"},
		{name: "blank values are unset", flag: "  ", env: map[string]string{dataDirEnv: " \t", xdgDataHomeEnv: "\n"}, home: "/h", want: "/h/.local/share/convkit"},
		{name: "relative xdg ignored", env: map[string]string{xdgDataHomeEnv: "rel"}, home: "/h", want: "/h/.local/share/convkit"},
		{name: "relative flag made absolute", flag: "d/../data", home: "/h", want: filepath.Join(cwd, "data")},
		{name: "relative env made absolute", env: map[string]string{dataDirEnv: "./e"}, home: "/h", want: filepath.Join(cwd, "e")},
		{name: "cleaned", flag: "/a//b/./c/", want: "/a/b/c"},
		{name: "nothing", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			got, err := ResolveDataDir(tt.flag, getenv, tt.home)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLayoutPaths(t *testing.T) {
	d := "/data"
	tests := []struct {
		name string
		got  func() (string, error)
		want string
	}{
		{"lock", func() (string, error) { return lockPath(d), nil }, "/data/runtime.lock"},
		{"index", func() (string, error) { return filepath.Join(d, IndexFileName), nil }, "/data/metadata.db"},
		{"conversations", func() (string, error) { return ConversationsDir(d), nil }, "/data/conversations"},
		{"conversation", func() (string, error) { return conversationPath(d, "a/b.c") }, "/data/conversations/a~002Fb.c"},
		{"conversation dotdot", func() (string, error) { return conversationPath(d, "..") }, "/data/conversations/~002E~002E"},
		{"conversation log v0", func() (string, error) { return convLogPath(d, "c", 0, convlog.Plain) }, "/data/conversations/c/metadata.jsonl"},
		{"conversation log v4 zst", func() (string, error) { return convLogPath(d, "c", 4, convlog.Zstd) }, "/data/conversations/c/metadata.v4.jsonl.zst"},
		{"session log", func() (string, error) { return sessLogPath(d, "c", "s.1", 4, convlog.Plain) }, "/data/conversations/c/s~002E1.v4.jsonl"},
		{"session named metadata", func() (string, error) { return sessLogPath(d, "c", "metadata", 4, convlog.Zstd) }, "/data/conversations/c/~006Detadata.v4.jsonl.zst"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.got()
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := conversationPath(d, ""); err == nil {
		t.Error("empty conversation id accepted")
	}
	if _, err := sessLogPath(d, "c", "", 1, convlog.Plain); err == nil {
		t.Error("empty session id accepted")
	}
}

func TestHoldsConversationLog(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string, files ...string) string {
		d := filepath.Join(dir, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(d, f), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	conv := mk("conv", ConversationLogName(4, convlog.Plain))
	session := mk("session", "s1.v4.jsonl")
	linked := mk("linked")
	if err := os.Symlink(filepath.Join(conv, ConversationLogName(4, convlog.Plain)), filepath.Join(linked, ConversationLogName(4, convlog.Plain))); err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]bool{conv: true, session: false, linked: false, filepath.Join(dir, "missing"): false} {
		if got := HoldsConversationLog(d); got != want {
			t.Errorf("HoldsConversationLog(%s) = %v, want %v", d, got, want)
		}
	}
}
