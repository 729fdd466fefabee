package store

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestCheck: each reason, in order; a nil Machine checks the working
// directory and the fork sources only.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte("[agents.coder]\n[models.m1]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, warning, err := LoadMachine(cfgPath, true)
	if err != nil || warning != "" || !m.Checked() {
		t.Fatal(err, warning)
	}
	present := func(id string) bool { return id == "here" }
	for _, tc := range []struct {
		n    Needs
		want []string
	}{
		{Needs{Cwd: dir, Agents: []string{"coder"}, Models: []string{"m1"}, Sources: []string{"here"}}, []string{}},
		{Needs{Cwd: filepath.Join(dir, "gone"), Agents: []string{"coder", "writer"}, Models: []string{"m1", "m2", ""}, Sources: []string{"here", "away"}},
			[]string{"working directory " + filepath.Join(dir, "gone") + " does not exist here", `agent "writer" is not configured in ` + cfgPath,
				`model "m2" is not configured in ` + cfgPath, forkSourceMissing("away")}},
		{Needs{Cwd: file}, []string{"working directory " + file + " is not a directory"}},
		{Needs{}, []string{"it records no working directory"}},
	} {
		if got := m.Check(tc.n, present); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Check(%+v) = %q, want %q", tc.n, got, tc.want)
		}
	}
	var none *Machine
	got := none.Check(Needs{Cwd: dir, Agents: []string{"writer"}, Sources: []string{"away"}}, present)
	if !reflect.DeepEqual(got, []string{forkSourceMissing("away")}) || none.Checked() {
		t.Fatalf("a nil Machine: %q", got)
	}
	// Without a configuration: agents and models are not checked, and the
	// warning says where none was found.
	m, warning, err = LoadMachine(filepath.Join(dir, "none.toml"), false)
	if err != nil || m.Checked() || warning != ConfigNotCheckedWarning(filepath.Join(dir, "none.toml")) {
		t.Fatal(err, warning)
	}
	if got := m.Check(Needs{Cwd: dir, Agents: []string{"writer"}}, nil); len(got) != 0 {
		t.Fatalf("without a configuration: %q", got)
	}
	// A FIFO in the configuration's place is refused without blocking.
	fifo := filepath.Join(dir, "fifo.toml")
	if err := mkfifo(fifo); err == nil {
		if _, _, err := LoadMachine(fifo, true); err == nil {
			t.Fatal("a FIFO as the configuration was accepted")
		}
	}
}
