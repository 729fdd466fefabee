package hostile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/convkit/convkit/internal/cli"
)

// The fallback of the full-disk cases where mount(2) is not permitted: the
// test binary runs again as convkit (TestMain calls limitedMain, which is
// cli.Main, as cmd/convkit's main is) in a child process whose
// RLIMIT_FSIZE is set, so that writing past it fails with EFBIG. Go ignores
// SIGXFSZ unless asked for it, so the write returns the error instead of
// the process dying.

// limitedEnv carries "LIMIT" to the child; limitedArgs the arguments.
const (
	limitedEnv  = "HOSTILE_CONVKIT_FSIZE"
	limitedArgs = "HOSTILE_CONVKIT_ARGS"
)

func limitedMain() int {
	limit, err := strconv.ParseUint(os.Getenv(limitedEnv), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad", limitedEnv, err)
		return 99
	}
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv(limitedArgs)), &args); err != nil {
		fmt.Fprintln(os.Stderr, "bad", limitedArgs, err)
		return 99
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		return 99
	}
	return cli.Main(context.Background(), args, os.Stdin, os.Stdout, os.Stderr, func(string) string { return "" })
}

// runLimited runs convkit --data-dir DATA args... in a child process that
// cannot write a file past limit bytes.
func (f *fx) runLimited(limit int64, args ...string) result {
	f.t.Helper()
	full, _ := json.Marshal(append([]string{"convkit", "--data-dir", f.data}, args...))
	self, err := os.Executable()
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), limitedEnv+"="+strconv.FormatInt(limit, 10), limitedArgs+"="+string(full), "TMPDIR="+f.tmp)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	var ee *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		f.t.Fatal(err)
	}
	if ctx.Err() != nil {
		f.t.Fatalf("convkit %s did not return within %v: it hangs", strings.Join(args, " "), cmdTimeout)
	}
	if code == 99 {
		f.t.Fatalf("the limited child failed to start: %s", errOut.String())
	}
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}
