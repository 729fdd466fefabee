package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/convkit/convkit/internal/cli"
	"github.com/convkit/convkit/store"
)

var update = flag.Bool("update", false, "rewrite the expected output in testdata/script/*.txtar")

// TestMain makes the test binary double as the convkit binary: scripts run
// it as "exec convkit ...", which calls main.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"convkit":  main,
		"holdlock": holdlock,
		// convkit built with a session writer of format version 5.
		"convkit-writer5": func() { cli.SetWriterVersion(5); main() },
	})
}

func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       *update,
		Setup: func(env *testscript.Env) error {
			// Nothing a script runs may touch the real home or data dir.
			home := filepath.Join(env.WorkDir, "home")
			env.Setenv("HOME", home)
			env.Setenv("XDG_DATA_HOME", filepath.Join(home, ".local", "share"))
			env.Setenv("CONVKIT_DATA_DIR", filepath.Join(env.WorkDir, "data"))
			// The checkout's scripts, for the scripts_*.txtar tests.
			scripts, err := filepath.Abs(filepath.Join("..", "..", "scripts"))
			if err != nil {
				return err
			}
			env.Setenv("SCRIPTS", scripts)
			return nil
		},
		Condition: condition,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": cmdExitcode,
			"waitfile": cmdWaitfile,
		},
	})
}

// condition adds the scripts' own conditions to testscript's:
//
//	[systemd-offline]  systemd-analyze can score a unit file offline
//	                   (security --offline, systemd 250 and later)
func condition(cond string) (bool, error) {
	switch cond {
	case "systemd-offline":
		out, err := exec.Command("systemd-analyze", "security", "--help").Output()
		return err == nil && strings.Contains(string(out), "--offline"), nil
	}
	return false, fmt.Errorf("unknown condition %q", cond)
}

// cmdExitcode runs a program and checks its exit status:
//
//	exitcode N program [args...]
//
// Like exec, it leaves the program's output for the stdout and stderr
// commands that follow. (It must not call ts.Stdout, which would replace
// that output with its own.)
func cmdExitcode(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! exitcode")
	}
	if len(args) < 2 {
		ts.Fatalf("usage: exitcode N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: bad status %q", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			ts.Fatalf("exitcode: %v", err)
		}
		got = exitErr.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// holdlock is a second process for scripts:
//
//	exec holdlock DATADIR &name&
//
// It takes runtime.lock in DATADIR as the runtime does, creates
// DATADIR/.held, and exits 0 once DATADIR/.release appears (scripts end it
// that way rather than by a kill, which would fail the wait).
func holdlock() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: holdlock DATADIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	lock, err := store.Open(context.Background(), dir, store.OpenOptions{Lock: store.LockOptions{
		Mode:    store.LockExclusive,
		Command: "holdlock",
	}, Create: store.CreateAlways})
	if err != nil {
		fmt.Fprintln(os.Stderr, "holdlock:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(filepath.Join(dir, ".held"), nil, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "holdlock:", err)
		os.Exit(1)
	}
	if !waitFor(filepath.Join(dir, ".release")) {
		fmt.Fprintln(os.Stderr, "holdlock: no .release after", waitTimeout)
		os.Exit(1)
	}
	if err := lock.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "holdlock:", err)
		os.Exit(1)
	}
}

// cmdWaitfile waits until a file exists:
//
//	waitfile PATH
func cmdWaitfile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfile PATH")
	}
	if !waitFor(ts.MkAbs(args[0])) {
		ts.Fatalf("waitfile: no %s after %v", args[0], waitTimeout)
	}
}

const waitTimeout = time.Minute

// waitFor polls until path exists, for at most waitTimeout.
func waitFor(path string) bool {
	for deadline := time.Now().Add(waitTimeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
	}
	return false
}
