package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// asMain, set in the environment, makes the test binary run as convkit:
// shells the tests start (completion) run it through convkitOnPath.
const asMain = "CONVKIT_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		os.Exit(Main(context.Background(), os.Args, os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	os.Exit(m.Run())
}

// convkitOnPath makes a directory holding a convkit that is this test
// binary run as convkit, and returns a PATH with it first.
func convkitOnPath(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	script := "#!/bin/sh\n" + asMain + "=1 exec " + shQuote(self) + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "convkit"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return bin + string(os.PathListSeparator) + os.Getenv("PATH")
}
