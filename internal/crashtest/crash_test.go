//go:build unix

package crashtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/convkit/convkit/backup"
	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/store"
)

// bin is the convkit binary TestMain builds.
var bin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "convkit-crashtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 1
	if err := build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "crashtest:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// build compiles this module's ./cmd/convkit into dir.
func build(dir string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	bin = filepath.Join(dir, "convkit")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/convkit")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/convkit: %v\n%s", err, out)
	}
	return nil
}

func moduleRoot() (string, error) {
	if out, err := exec.Command("go", "env", "GOMOD").Output(); err == nil {
		if gomod := strings.TrimSpace(string(out)); gomod != "" && gomod != os.DevNull {
			return filepath.Dir(gomod), nil
		}
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot find the module root")
	}
	return filepath.Join(filepath.Dir(file), "..", ".."), nil
}

// envInt reads a positive integer from the environment.
func envInt(name string) (uint64, bool) {
	n, err := strconv.ParseUint(os.Getenv(name), 10, 64)
	return n, err == nil && n > 0
}

// killPlan is how many kills a crash test makes and the seed of their
// moments: 4 and the clock unless CONVKIT_CRASH_KILLS and
// CONVKIT_CRASH_SEED say otherwise; it logs both, and skips the test
// under -short. per says what the kill count is per ("per job").
func killPlan(t *testing.T, per string) (kills, seed uint64) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds convkit and kills processes")
	}
	kills, seed = 4, uint64(time.Now().UnixNano())
	if n, ok := envInt("CONVKIT_CRASH_KILLS"); ok {
		kills = n
	}
	if n, ok := envInt("CONVKIT_CRASH_SEED"); ok {
		seed = n
	}
	if per != "" {
		per = " " + per
	}
	t.Logf("seed %d (CONVKIT_CRASH_SEED=%d repeats the kill moments); %d kills%s", seed, seed, kills, per)
	return kills, seed
}

// TestSIGKILL kills each writing job at random moments and checks, after
// every kill and after the rerun that follows it:
//
//  1. the inputs are intact: the originals byte-identical, a replaced
//     store or conversation kept whole where the documentation says;
//  2. nothing is published half-written: every log under its final name
//     reads to its end, every archive under its final name verifies;
//  3. after the rerun no temporary file is left (durable's naming);
//  4. the rerun exits as the uninterrupted run did (never 11: the killed
//     process's flock died with it), and reindex, reindex --check pass;
//  5. the rerun's result equals the uninterrupted run's (what is compared
//     is said at each job).
func TestSIGKILL(t *testing.T) {
	kills, seed := killPlan(t, "per job")
	h := &harness{env: childEnv(t.TempDir())}
	in := prepareInputs(t, h)
	jobs := []*job{migrateJob(h, in), reindexJob(h, in), backupJob(h, in), restoreJob(h, in), importJob(h, in),
		deleteJob(h, in), restoreConversationJob(h, in), pruneJob(h, in)}
	start := time.Now()
	var total, midway int
	for i, j := range jobs {
		t.Run(j.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			mid := crash(t, h, j, int(kills), rng)
			total += int(kills)
			midway += mid
		})
	}
	t.Logf("%d kills, %d mid-way, in %s", total, midway, time.Since(start).Round(time.Second))
}

// A job is one writing command under test.
type job struct {
	name string
	// prepare lays out a fresh copy of the job's inputs under dir.
	prepare func(t *testing.T, dir string) *trial
}

// A trial is one fresh copy of a job's inputs, its command line and the
// checks that apply to it.
type trial struct {
	args []string
	// dataDir is the store reindex and reindex --check run on afterwards.
	dataDir string
	// scan are the directories that must hold no temporary file after a
	// completed run.
	scan []string
	// intact is check 1, published check 2; want is the uninterrupted
	// run's result (nil while that run is made).
	intact    func(t *testing.T, at string)
	published func(t *testing.T, at string, want map[string]string)
	// result is what a run produced (check 5).
	result func(t *testing.T) map[string]string
	// extra, when set, accepts an entry of a rerun's result that the
	// uninterrupted run does not have (a documented leftover).
	extra func(key, value string) bool
	// rerunCheck, when set, looks at the store a kill left and returns a
	// check of what the rerun then printed on stdout.
	rerunCheck func(t *testing.T, at string) func(stdout string)
}

// crash runs j uninterrupted, then kills it kills times, and returns how
// many kills landed while the process ran.
func crash(t *testing.T, h *harness, j *job, kills int, rng *rand.Rand) int {
	base := t.TempDir()
	ref := j.prepare(t, filepath.Join(base, "ref"))
	o := h.run(t, ref.args...)
	refCode, took := o.code, o.took
	ref.intact(t, "uninterrupted run")
	ref.published(t, "uninterrupted run", nil)
	want := ref.result(t)
	checkCode := h.run(t, "--data-dir", ref.dataDir, "-q", "reindex", "--check").code
	h.must(t, 0, "--data-dir", ref.dataDir, "-q", "reindex")
	h.must(t, 0, "--data-dir", ref.dataDir, "-q", "reindex", "--check")
	if left := temps(t, ref.scan...); len(left) > 0 {
		t.Fatalf("the uninterrupted run left temporary files: %v", left)
	}
	os.RemoveAll(filepath.Join(base, "ref"))
	// A second timing on a fresh copy: on a busy disk one run can take
	// several times as long, and kills would then land after the exit.
	again := j.prepare(t, filepath.Join(base, "timing"))
	if o := h.run(t, again.args...); o.code == refCode {
		took = min(took, o.took)
	}
	os.RemoveAll(filepath.Join(base, "timing"))

	mid := 0
	for k := range kills {
		dir := filepath.Join(base, fmt.Sprintf("kill%d", k))
		tr := j.prepare(t, dir)
		delay := time.Duration(rng.Int64N(int64(took) + 1))
		at := fmt.Sprintf("kill %d at %s", k, delay.Round(time.Microsecond))
		if killed, _ := h.kill(t, delay, tr.args...); killed {
			mid++
		} else {
			at += " (after the exit)"
		}
		tr.intact(t, at)
		tr.published(t, at, want)
		h.unlocked(t, tr.dataDir, at)

		at += ", rerun"
		var check func(string)
		if tr.rerunCheck != nil {
			check = tr.rerunCheck(t, at)
		}
		o := h.run(t, tr.args...)
		if o.code == 11 {
			t.Fatalf("%s: exit 11: runtime.lock still counts as held after its holder was killed\n%s", at, o.stderr)
		}
		if o.code != refCode {
			t.Fatalf("%s: exit %d, the uninterrupted run exits %d\n%s", at, o.code, refCode, o.stderr)
		}
		if check != nil {
			check(o.stdout)
		}
		tr.intact(t, at)
		tr.published(t, at, want)
		if left := temps(t, tr.scan...); len(left) > 0 {
			t.Fatalf("%s: temporary files remain: %v", at, left)
		}
		compare(t, at, want, tr.result(t), tr.extra)
		if c := h.run(t, "--data-dir", tr.dataDir, "-q", "reindex", "--check").code; c != checkCode {
			t.Fatalf("%s: reindex --check exits %d; after the uninterrupted run it exits %d", at, c, checkCode)
		}
		h.must(t, 0, "--data-dir", tr.dataDir, "-q", "reindex")
		h.must(t, 0, "--data-dir", tr.dataDir, "-q", "reindex", "--check")
		os.RemoveAll(dir)
	}
	t.Logf("%s: %d of %d kills landed mid-way (uninterrupted run: exit %d in %s)", j.name, mid, kills, refCode, took.Round(time.Millisecond))
	return mid
}

// compare fails on any difference between the uninterrupted run's result
// and a rerun's.
func compare(t *testing.T, at string, want, got map[string]string, extra func(k, v string) bool) {
	t.Helper()
	var diffs []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			diffs = append(diffs, "missing: "+k)
		case g != w:
			diffs = append(diffs, fmt.Sprintf("differs: %s:\n\twant %.300s\n\tgot  %.300s", k, w, g))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok && (extra == nil || !extra(k, g)) {
			diffs = append(diffs, "extra: "+k)
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		if len(diffs) > 10 {
			diffs = append(diffs[:10], fmt.Sprintf("… and %d more", len(diffs)-10))
		}
		t.Fatalf("%s: the result differs from the uninterrupted run's:\n%s", at, strings.Join(diffs, "\n"))
	}
}

// harness runs the binary.
type harness struct {
	env []string
}

// childEnv is the environment of every convkit process: nothing of the
// developer's store or configuration, and a private TMPDIR (migrate's
// report folders, verify's extraction).
func childEnv(tmp string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "CONVKIT_DATA_DIR", "CONVKIT_CONFIG", "XDG_DATA_HOME", "TMPDIR":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "TMPDIR="+tmp)
}

type outcome struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

func (h *harness) command(args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.Command(bin, args...)
	cmd.Env = h.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	return cmd, &out, &errb
}

func (h *harness) run(t *testing.T, args ...string) outcome {
	t.Helper()
	cmd, out, errb := h.command(args...)
	start := time.Now()
	err := cmd.Run()
	o := outcome{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		o.code = ee.ExitCode()
	default:
		t.Fatalf("convkit %s: %v", strings.Join(args, " "), err)
	}
	return o
}

// must runs convkit and fails unless it exits with code.
func (h *harness) must(t *testing.T, code int, args ...string) outcome {
	t.Helper()
	o := h.run(t, args...)
	if o.code != code {
		t.Fatalf("convkit %s: exit %d, want %d\n%s%s", strings.Join(args, " "), o.code, code, o.stdout, o.stderr)
	}
	return o
}

// kill starts convkit, sends it SIGKILL after delay and reports whether
// the signal ended it (a mid-way kill) rather than its own exit, and how
// long it ran.
func (h *harness) kill(t *testing.T, delay time.Duration, args ...string) (bool, time.Duration) {
	t.Helper()
	cmd, _, _ := h.command(args...)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
		return false, time.Since(start)
	case <-time.After(delay):
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, time.Since(start)
}

// unlocked checks that a killed holder's runtime.lock is free: the file
// stays, its flock died with the process.
func (h *harness) unlocked(t *testing.T, dataDir, at string) {
	t.Helper()
	o := h.must(t, 0, "--data-dir", dataDir, "--json", "lock", "status")
	var st struct{ Held bool }
	if err := json.Unmarshal([]byte(o.stdout), &st); err != nil || st.Held {
		t.Fatalf("%s: lock status: %v %s", at, err, o.stdout)
	}
}

// The inputs every trial copies.
type inputs struct {
	// gen is a generated store with logs of every format version, plain
	// and compressed, torn tails, forks and an interrupted deletion. Its
	// corrupt conversation is removed: with it reindex always exits 3,
	// which would hide a skip a crash caused.
	gen string
	// migrated is gen migrated: each older log beside its successor, for
	// prune.
	migrated string
	// live is gen with an index behind its logs (a conversation renamed
	// and a deletion interrupted after the index was built), as a store
	// looks where the runtime died between appending and indexing.
	live string
	// archive is a backup of live.
	archive string
	// oldStore is another store, with an index, that restore --force
	// replaces.
	oldStore string
	// target is the store import writes into; bundle an export from a
	// newer copy of gen (see prepareImport).
	target, bundle string
	// bundleTree is bundle extracted; config and cwdRoot let every
	// conversation open here (no import warning).
	bundleTree, config, cwdRoot string
	// archiveTree is archive extracted.
	archiveTree string
	// deleteIDs are the conversations the delete job deletes: plain ones
	// of live, the first with its deletion recorded.
	deleteIDs []string
	// forkID is live's fork made after a compaction, which restore
	// --conversation restores with the conversation it depends on.
	forkID string
	// updated are the conversations (directory names) import updates.
	updated []string
	// targetFiles and bundleFiles are the logs of target and bundle by
	// conversation directory; targetDigest the target's logs as import's
	// result names a copy kept in replaced/.
	targetFiles, bundleFiles map[string]map[string]fileSum
	targetDigest             map[string]string
}

func prepareInputs(t *testing.T, h *harness) *inputs {
	dir := t.TempDir()
	in := &inputs{gen: filepath.Join(dir, "gen")}
	rep := generate(t, in.gen, 31, 40)

	// Plain conversations for the API edits below: no fork relation, no
	// running turn, no tombstone, not the removed corrupt one.
	var plain []string
	related := map[string]bool{}
	for _, c := range rep.Conversations {
		for _, d := range append(c.DependsOn, c.ForkedFrom) {
			related[d] = true
		}
	}
	for _, c := range rep.Conversations {
		if c.Deleting || c.Has(fixtures.CaseCorrupt) || c.ForkedFrom != "" || len(c.DependsOn) > 0 || related[c.ID] ||
			c.Has(fixtures.CaseRunningTurn) || c.Has(fixtures.CaseTornPlain) || c.Has(fixtures.CaseTornZstd) {
			continue
		}
		plain = append(plain, c.ID)
	}
	if len(plain) < 16 {
		t.Fatalf("only %d plain conversations", len(plain))
	}
	tree, err := reader(t, in.gen).Walk()
	if err != nil {
		t.Fatal(err)
	}
	logs, older := 0, 0
	for _, c := range tree.Conversations {
		for _, l := range c.Logs {
			logs++
			if l.Current.Version < convlog.CurrentVersion {
				older++
			}
		}
	}
	t.Logf("store: %d conversations, %d logs, %d of them older than v%d", len(tree.Conversations), logs, older, convlog.CurrentVersion)

	in.migrated = filepath.Join(dir, "migrated")
	copyTree(t, in.gen, in.migrated)
	h.must(t, 0, "--data-dir", in.migrated, "-q", "migrate")

	in.live = filepath.Join(dir, "live")
	copyTree(t, in.gen, in.live)
	h.must(t, 0, "--data-dir", in.live, "-q", "reindex")
	edit(t, in.live, func(s *store.Store) error {
		if err := s.Rename(plain[0], "renamed after the index was built"); err != nil {
			return err
		}
		return s.MarkDeleting(plain[1])
	})

	bk := filepath.Join(dir, "backups")
	h.must(t, 0, "--data-dir", in.live, "-q", "backup", "--to", bk)
	list, err := backup.ListArchives(bk)
	if err != nil || len(list) != 1 {
		t.Fatalf("backups: %v %v", list, err)
	}
	in.archive = list[0].Path

	in.deleteIDs = plain[1:6]
	if f := rep.Find(fixtures.CaseForkAfterCompaction); f != nil && len(f.DependsOn) > 0 {
		in.forkID = f.ID
	} else {
		t.Fatal("no fork after compaction in the generated store")
	}
	in.archiveTree = filepath.Join(dir, "archive")
	extractTo(t, in.archive, in.archiveTree)

	in.oldStore = filepath.Join(dir, "old")
	generate(t, in.oldStore, 32, 25)
	h.must(t, 0, "--data-dir", in.oldStore, "-q", "reindex")

	prepareImport(t, h, in, dir, plain[2:])
	return in
}

// prepareImport makes import's target and bundle. The target is gen as
// it was; the bundle comes from gen after more was written to it. So
// import meets every case: conversations it lacks (import), identical
// ones (unchanged), ones it holds a prefix of (update: renamed in the
// source) and ones changed on both sides (replace), and it maps every
// working directory with --map-cwd.
func prepareImport(t *testing.T, h *harness, in *inputs, dir string, plain []string) {
	src := filepath.Join(dir, "source")
	copyTree(t, in.gen, src)
	in.target = filepath.Join(dir, "target")
	copyTree(t, in.gen, in.target)
	updated, replaced, absent := plain[:4], plain[4:7], plain[7:14]
	edit(t, src, func(s *store.Store) error {
		for _, id := range append(updated, replaced...) {
			if err := s.Rename(id, "renamed on the source machine"); err != nil {
				return err
			}
		}
		return nil
	})
	edit(t, in.target, func(s *store.Store) error {
		for _, id := range replaced {
			if err := s.Rename(id, "renamed on the target machine"); err != nil {
				return err
			}
		}
		return nil
	})
	for _, id := range absent {
		p, _ := reader(t, in.target).ConversationPath(id)
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
	h.must(t, 0, "--data-dir", in.target, "-q", "reindex")
	for _, id := range updated {
		name, _ := store.EncodeSegment(id)
		in.updated = append(in.updated, name)
	}

	// Export every conversation of the source that is not being deleted.
	args := []string{"--data-dir", src, "-q", "export", "--to", filepath.Join(dir, "bundle.tar.zst")}
	agents, models, cwds := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, root := range []string{src, in.target} {
		tr, err := reader(t, root).Walk()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range tr.Conversations {
			info, err := reader(t, root).ReadConversation(c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if info.Deleting {
				continue
			}
			if root == src {
				args = append(args, c.ID)
			}
			for _, a := range info.Agents {
				agents[a] = true
			}
			for _, m := range info.Models {
				models[m] = true
			}
			cwds[info.Cwd] = true
		}
	}
	in.bundle = filepath.Join(dir, "bundle.tar.zst")
	h.must(t, 0, args...)

	// Every working directory exists here once mapped, every agent and
	// model is configured: the import has nothing to warn about.
	in.cwdRoot = filepath.Join(dir, "src")
	for cwd := range cwds {
		rel, ok := strings.CutPrefix(cwd, "/home/dev/src/")
		if !ok {
			t.Fatalf("working directory %s is not under /home/dev/src", cwd)
		}
		if err := os.MkdirAll(filepath.Join(in.cwdRoot, rel), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var cfg strings.Builder
	for _, a := range sortedKeys(agents) {
		fmt.Fprintf(&cfg, "[agents.%s]\n", strconv.Quote(a))
	}
	for _, m := range sortedKeys(models) {
		fmt.Fprintf(&cfg, "[models.%s]\n", strconv.Quote(m))
	}
	in.config = filepath.Join(dir, "config.toml")
	if err := os.WriteFile(in.config, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	in.bundleTree = filepath.Join(dir, "bundle")
	extractTo(t, in.bundle, in.bundleTree)
	in.targetFiles = dirSums(t, store.ConversationsDir(in.target))
	in.bundleFiles = dirSums(t, store.ConversationsDir(in.bundleTree))
	in.targetDigest = map[string]string{}
	for k, v := range digestTree(t, store.ConversationsDir(in.target), eventsDigest) {
		in.targetDigest["replaced/"+k] = v
	}
}

// extractTo extracts the archive at p into the new directory dir.
func extractTo(t *testing.T, p, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := archive.Extract(context.Background(), f, dir, archive.ExtractOptions{}); err != nil {
		t.Fatal(err)
	}
}

// generate writes a fixtures store without its corrupt conversation.
func generate(t *testing.T, dir string, seed int64, n int) *fixtures.Report {
	t.Helper()
	rep, err := fixtures.Generate(dir, fixtures.Options{Seed: seed, Conversations: n})
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Find(fixtures.CaseCorrupt); c != nil {
		if err := os.RemoveAll(c.Dir); err != nil {
			t.Fatal(err)
		}
	}
	return rep
}

// edit changes a store through the store API, as the runtime would.
func edit(t *testing.T, dataDir string, f func(*store.Store) error) {
	t.Helper()
	s, err := store.Open(context.Background(), dataDir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	err = f(s)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// migrate: compared are the set of files under conversations/ and each
// file's decompressed bytes (successors are deterministic).
func migrateJob(h *harness, in *inputs) *job {
	return &job{name: "migrate", prepare: func(t *testing.T, dir string) *trial {
		data := filepath.Join(dir, "data")
		copyTree(t, in.gen, data)
		root := store.ConversationsDir(data)
		orig := hashTree(t, root, nil)
		return &trial{
			args:    []string{"--data-dir", data, "-q", "migrate"},
			dataDir: data,
			scan:    []string{data},
			intact:  func(t *testing.T, at string) { sameFiles(t, at, root, orig, nil) },
			published: func(t *testing.T, at string, _ map[string]string) {
				// Every successor under its final name is complete.
				for rel := range hashTree(t, root, nil) {
					if _, ok := orig[rel]; !ok && !isTemp(filepath.Base(rel)) {
						mustRead(t, at, filepath.Join(root, rel))
					}
				}
			},
			result: func(t *testing.T) map[string]string { return digestTree(t, root, plainDigest) },
		}
	}}
}

// reindex: compared are `list --json --all` and a `search --json`, from
// the index.
func reindexJob(h *harness, in *inputs) *job {
	return &job{name: "reindex", prepare: func(t *testing.T, dir string) *trial {
		data := filepath.Join(dir, "data")
		copyTree(t, in.live, data)
		root := store.ConversationsDir(data)
		orig := hashTree(t, root, nil)
		deleting := deletingDirs(t, data)
		db := filepath.Join(data, store.IndexFileName)
		oldDB := fileHash(t, db)
		return &trial{
			args:    []string{"--data-dir", data, "-q", "reindex"},
			dataDir: data,
			scan:    []string{data},
			intact: func(t *testing.T, at string) {
				// The conversation being deleted may be gone, wholly or
				// file by file; every other log stays as it is.
				sameFiles(t, at, root, orig, func(rel string) bool { return deleting[strings.Split(rel, "/")[0]] })
			},
			published: func(t *testing.T, at string, _ map[string]string) {
				// metadata.db is the old index or a complete new one.
				if fileHash(t, db) != oldDB {
					if o := h.run(t, "--data-dir", data, "-q", "reindex", "--check"); o.code != 0 {
						t.Fatalf("%s: metadata.db was replaced by an index that does not match the logs: exit %d\n%s%s", at, o.code, o.stdout, o.stderr)
					}
				}
			},
			result: func(t *testing.T) map[string]string {
				return map[string]string{
					"list":   h.must(t, 0, "--data-dir", data, "--json", "list", "--all").stdout,
					"search": h.must(t, 0, "--data-dir", data, "--json", "search", "--limit", "1000", "test*").stdout,
				}
			},
		}
	}}
}

// deletingDirs lists the conversation directories of the store in dataDir
// whose deletion is recorded, read before the job runs: after a kill such a
// directory may be in any state of its removal (session logs gone, then
// the conversation log, then the directory), where the store can no
// longer say that it was being deleted.
func deletingDirs(t *testing.T, dataDir string) map[string]bool {
	t.Helper()
	s, err := store.Open(context.Background(), dataDir, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ents, err := os.ReadDir(store.ConversationsDir(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range ents {
		id, err := store.DecodeSegment(e.Name())
		if err != nil {
			continue
		}
		if info, err := s.ReadConversation(id); err == nil && info.Deleting {
			out[e.Name()] = true
		}
	}
	if len(out) == 0 {
		t.Fatal("no conversation of the store has its deletion recorded")
	}
	return out
}

// backup: compared are the new archive's manifest (createdAt aside) and
// backup verify's report (archive name and createdAt aside).
func backupJob(h *harness, in *inputs) *job {
	return &job{name: "backup", prepare: func(t *testing.T, dir string) *trial {
		data, out := filepath.Join(dir, "data"), filepath.Join(dir, "backups")
		copyTree(t, in.live, data)
		orig := hashTree(t, data, isLockFile)
		verified := map[string]bool{}
		return &trial{
			args:    []string{"--data-dir", data, "-q", "backup", "--to", out},
			dataDir: data,
			scan:    []string{data, out},
			intact: func(t *testing.T, at string) {
				sameFiles(t, at, data, orig, nil)
				for rel := range hashTree(t, data, isLockFile) {
					if _, ok := orig[rel]; !ok {
						t.Fatalf("%s: backup wrote %s into the store", at, rel)
					}
				}
			},
			published: func(t *testing.T, at string, _ map[string]string) {
				list, err := backup.ListArchives(out)
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					t.Fatal(err)
				}
				for _, a := range list {
					if verified[a.Path] {
						continue
					}
					verified[a.Path] = true
					// Exit 3: it verifies, and holds the store's corrupt log.
					if o := h.run(t, "-q", "backup", "verify", a.Path); o.code != 0 && o.code != 3 {
						t.Fatalf("%s: %s is published but does not verify: exit %d\n%s%s", at, a.Name, o.code, o.stdout, o.stderr)
					}
					mode(t, at, a.Path, durable.FileMode)
				}
			},
			result: func(t *testing.T) map[string]string {
				list, err := backup.ListArchives(out)
				if err != nil || len(list) == 0 {
					t.Fatalf("no archive: %v", err)
				}
				a := list[len(list)-1].Path // the newest: the rerun's
				o := h.run(t, "--json", "backup", "verify", a)
				if o.code != 0 && o.code != 3 {
					t.Fatalf("backup verify %s: exit %d\n%s%s", a, o.code, o.stdout, o.stderr)
				}
				v := o.stdout
				return map[string]string{
					"manifest": withoutKeys(t, manifestOf(t, a), "createdAt"),
					"verify":   withoutKeys(t, []byte(v), "archive", "createdAt"),
				}
			},
		}
	}}
}

// manifestOf reads MANIFEST.json out of a backup archive.
func manifestOf(t *testing.T, path string) []byte {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := archive.Extract(context.Background(), f, dir, archive.ExtractOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, archive.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(dir)
	return b
}

// withoutKeys is a JSON object without the given top-level keys.
func withoutKeys(t *testing.T, b []byte, keys ...string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %.200s", err, b)
	}
	for _, k := range keys {
		delete(m, k)
	}
	out, _ := json.Marshal(m)
	return string(out)
}

// restore --force over an existing store: compared are the restored
// store's logs, byte for byte, and `list --json --all` from its index.
// The documented outcomes of a kill: the old store in place, or moved
// whole to <target>.replaced-<time> with the target missing or restored
// whole.
func restoreJob(h *harness, in *inputs) *job {
	return &job{name: "restore", prepare: func(t *testing.T, dir string) *trial {
		arch := filepath.Join(dir, "in", "backup.tar.zst")
		copyFile(t, in.archive, arch)
		archHash := fileHash(t, arch)
		parent := filepath.Join(dir, "t")
		target := filepath.Join(parent, "store")
		copyTree(t, in.oldStore, target)
		old := hashTree(t, target, isLockFile)
		// places are the target and the directories the old store (or a
		// restored one, on a rerun) was moved aside to.
		places := func(t *testing.T) []string {
			ents, err := os.ReadDir(parent)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, e := range ents {
				if e.Name() == "store" || strings.HasPrefix(e.Name(), "store.replaced-") {
					out = append(out, filepath.Join(parent, e.Name()))
				}
			}
			return out
		}
		isOld := func(t *testing.T, p string) bool { return equalMaps(hashTree(t, p, isLockFile), old) }
		tr := &trial{
			args:    []string{"-q", "restore", "--force", "--to", target, arch},
			dataDir: target,
			scan:    []string{parent},
		}
		tr.result = func(t *testing.T) map[string]string { return restoredDigest(t, h, target) }
		tr.intact = func(t *testing.T, at string) {
			if fileHash(t, arch) != archHash {
				t.Fatalf("%s: the archive changed", at)
			}
			n := 0
			for _, p := range places(t) {
				if isOld(t, p) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%s: the old store is found whole in %d places, want 1: %v", at, n, places(t))
			}
		}
		tr.published = func(t *testing.T, at string, want map[string]string) {
			for _, p := range places(t) {
				if want == nil || isOld(t, p) {
					continue
				}
				compare(t, at+": "+filepath.Base(p), want, restoredDigest(t, h, p), nil)
			}
		}
		return tr
	}}
}

// restoredDigest is a restored store's logs (raw bytes) and its listing.
func restoredDigest(t *testing.T, h *harness, dataDir string) map[string]string {
	d := digestTree(t, store.ConversationsDir(dataDir), rawDigest)
	d["list"] = h.must(t, 0, "--data-dir", dataDir, "--json", "list", "--all").stdout
	return d
}

// import --on-conflict replace --map-cwd: compared are the logs under
// conversations/ and replaced/ (each aside directory under its
// conversation's name, without the time), by their events, where a
// conversation/cwd-mapped event's time is left out: it is the clock of
// the run that recorded it. A rerun may also hold, in replaced/, the old
// copy of a conversation whose update was interrupted between its two
// renames (docs/TRANSFER.md, Crashes).
func importJob(h *harness, in *inputs) *job {
	tOrig, bundle := in.targetFiles, in.bundleFiles
	return &job{name: "import", prepare: func(t *testing.T, dir string) *trial {
		file := filepath.Join(dir, "in", "bundle.tar.zst")
		copyFile(t, in.bundle, file)
		fileSum := fileHash(t, file)
		data := filepath.Join(dir, "data")
		copyTree(t, in.target, data)
		conv, replaced := store.ConversationsDir(data), filepath.Join(data, "replaced")
		return &trial{
			args: []string{"--data-dir", data, "-q", "import", "--on-conflict", "replace",
				"--map-cwd", "/home/dev/src=" + in.cwdRoot, "--config", in.config, file},
			dataDir: data,
			scan:    []string{data},
			intact: func(t *testing.T, at string) {
				if fileHash(t, file) != fileSum {
					t.Fatalf("%s: the bundle changed", at)
				}
				// Every byte the store had is still there: each log a
				// prefix of its successor in place, or the directory kept
				// whole in replaced/.
				asides := asideDirs(t, replaced)
				for name, files := range tOrig {
					if extends(t, filepath.Join(conv, name), files, false) {
						continue
					}
					kept := false
					for _, a := range asides[name] {
						kept = kept || equalMaps(hashTree(t, a, nil), sha(files))
					}
					if !kept {
						t.Fatalf("%s: the store's copy of %s is neither in place nor kept whole in replaced/", at, name)
					}
				}
			},
			published: func(t *testing.T, at string, _ map[string]string) {
				ents, err := os.ReadDir(conv)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range ents {
					name := e.Name()
					p := filepath.Join(conv, name)
					if isTemp(name) {
						continue
					}
					// A conversation is the store's copy or the bundle's,
					// whole (with cwd-mapped events appended).
					old, inT := tOrig[name]
					nw, inB := bundle[name]
					if !(inT && extends(t, p, old, true)) && !(inB && extends(t, p, nw, true)) {
						t.Fatalf("%s: %s is neither the store's copy nor the bundle's", at, p)
					}
					for rel, h := range hashTree(t, p, nil) {
						if inT && old[rel].sha == h {
							continue // untouched original (a torn tail is allowed there)
						}
						mustRead(t, at, filepath.Join(p, rel))
					}
				}
				// replaced/ holds whole copies of the store's conversations.
				for name, list := range asideDirs(t, replaced) {
					for _, a := range list {
						if !equalMaps(hashTree(t, a, nil), sha(tOrig[name])) {
							t.Fatalf("%s: %s is not a whole copy of the store's conversation", at, a)
						}
					}
				}
			},
			result: func(t *testing.T) map[string]string {
				d := digestTree(t, conv, eventsDigest)
				for k, v := range digestTree(t, replaced, eventsDigest) {
					d["replaced/"+asideRE.ReplaceAllString(k, "$1")] = v
				}
				return d
			},
			extra: func(k, v string) bool {
				// The old copy of an interrupted update.
				name := strings.Split(strings.TrimPrefix(k, "replaced/"), "/")[0]
				return strings.HasPrefix(k, "replaced/") && contains(in.updated, name) && in.targetDigest[k] == v
			},
		}
	}}
}

// asideRE matches what import moves aside: <dir>-<UTC time>[-N].
var asideRE = regexp.MustCompile(`^([^/]+)-\d{8}T\d{6}Z(?:-\d+)?`)

// asideDirs lists replaced/ by the conversation directory each entry is a
// copy of.
func asideDirs(t *testing.T, replaced string) map[string][]string {
	t.Helper()
	ents, err := os.ReadDir(replaced)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, e := range ents {
		m := asideRE.FindStringSubmatch(e.Name())
		if m == nil || m[0] != e.Name() {
			t.Fatalf("unexpected entry in replaced/: %s", e.Name())
		}
		out[m[1]] = append(out[m[1]], filepath.Join(replaced, e.Name()))
	}
	return out
}

// fileSum is a file's size and SHA-256.
type fileSum struct {
	size int64
	sha  string
}

// dirSums lists the files of every conversation directory under root.
func dirSums(t *testing.T, root string) map[string]map[string]fileSum {
	t.Helper()
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]fileSum{}
	for _, e := range ents {
		files := map[string]fileSum{}
		for rel, h := range hashTree(t, filepath.Join(root, e.Name()), nil) {
			fi, err := os.Stat(filepath.Join(root, e.Name(), rel))
			if err != nil {
				t.Fatal(err)
			}
			files[rel] = fileSum{size: fi.Size(), sha: h}
		}
		out[e.Name()] = files
	}
	return out
}

// sha is files' hashes alone.
func sha(files map[string]fileSum) map[string]string {
	out := map[string]string{}
	for k, v := range files {
		out[k] = v.sha
	}
	return out
}

// extends reports whether dir holds every file of files with its bytes as
// a prefix (appends since are allowed), and, when exact, no other file.
func extends(t *testing.T, dir string, files map[string]fileSum, exact bool) bool {
	t.Helper()
	if _, err := os.Lstat(dir); err != nil {
		return false
	}
	if exact && len(hashTree(t, dir, nil)) != len(files) {
		return false
	}
	for rel, want := range files {
		f, err := os.Open(filepath.Join(dir, rel))
		if err != nil {
			return false
		}
		h := sha256.New()
		n, err := io.Copy(h, io.LimitReader(f, want.size))
		f.Close()
		if err != nil || n != want.size || hex.EncodeToString(h.Sum(nil)) != want.sha {
			return false
		}
	}
	return true
}

// hashTree maps every regular file under root (slash-separated, relative)
// to its SHA-256; skip leaves files out. A missing root is empty.
func hashTree(t *testing.T, root string, skip func(rel string) bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if skip == nil || !skip(rel) {
			out[rel] = fileHash(t, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// isLockFile: runtime.lock's content is the holder record that every
// writing command rewrites when it takes the lock.
func isLockFile(rel string) bool { return rel == store.LockFileName }

// sameFiles fails unless every file of orig (under root) is unchanged;
// files for which mayVanish says so may be missing.
func sameFiles(t *testing.T, at, root string, orig map[string]string, mayVanish func(rel string) bool) {
	t.Helper()
	for rel, want := range orig {
		switch got := fileHash(t, filepath.Join(root, rel)); {
		case got == want:
		case got == "" && mayVanish != nil && mayVanish(rel):
		case got == "":
			t.Fatalf("%s: original %s is gone", at, rel)
		default:
			t.Fatalf("%s: original %s changed", at, rel)
		}
	}
}

// fileHash is the SHA-256 of a file, "" when it does not exist.
func fileHash(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// mustRead fails unless the log at path is private and reads to its end
// with the strict reader, without a torn tail.
func mustRead(t *testing.T, at, path string) {
	t.Helper()
	mode(t, at, path, durable.FileMode)
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err == nil {
		for _, err = range r.Events() {
			// err is what ended the read: nil at the end.
		}
		if err == nil && r.Stats().TornTail {
			err = errors.New("torn tail")
		}
		r.Close()
	}
	if err != nil {
		t.Fatalf("%s: %s is published but incomplete: %v", at, path, err)
	}
}

func mode(t *testing.T, at, path string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != want {
		t.Fatalf("%s: %s has mode %v, want %v", at, path, fi.Mode(), want)
	}
}

// digestTree maps every file under root but temporaries to digest(path).
func digestTree(t *testing.T, root string, digest func(string) string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for rel := range hashTree(t, root, nil) {
		if !isTemp(filepath.Base(rel)) {
			out[rel] = digest(filepath.Join(root, filepath.FromSlash(rel)))
		}
	}
	return out
}

func rawDigest(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// plainDigest hashes a log's decompressed bytes (the raw bytes of one that
// does not decompress: a torn frame).
func plainDigest(path string) string {
	if !strings.HasSuffix(path, convlog.ZstSuffix) && !strings.HasSuffix(path, convlog.ZstdSuffix) {
		return rawDigest(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	defer f.Close()
	d, err := zstd.NewReader(f)
	if err != nil {
		return "raw " + rawDigest(path)
	}
	defer d.Close()
	h := sha256.New()
	if _, err := io.Copy(h, d); err != nil {
		return "raw " + rawDigest(path)
	}
	return "plain " + hex.EncodeToString(h.Sum(nil))
}

// eventsDigest hashes a log's header and events as stored, except the time
// of conversation/cwd-mapped events. A log that does not read strictly to
// its end is hashed raw.
func eventsDigest(path string) string {
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err != nil {
		return "raw " + rawDigest(path)
	}
	defer r.Close()
	h := sha256.New()
	h.Write(r.Header().Raw)
	for e, err := range r.Events() {
		if err != nil {
			return "raw " + rawDigest(path)
		}
		if e.Type == store.EventConversationCwdMapped {
			fmt.Fprintf(h, "\n%s %d %s", e.Type, e.Seq, e.Data)
		} else {
			fmt.Fprintf(h, "\n%s", e.Raw)
		}
	}
	if r.Stats().TornTail {
		return "raw " + rawDigest(path)
	}
	return "events " + hex.EncodeToString(h.Sum(nil))
}

// isTemp reports a temporary name: durable's (…​.tmp), and the files
// SQLite and backup keep beside one (….tmp-wal, ….tmp.index).
func isTemp(name string) bool {
	return durable.IsTemp(name) || strings.Contains(name, durable.TempSuffix+"-") ||
		strings.Contains(name, durable.TempSuffix+".")
}

// temps lists the temporary files and directories under dirs.
func temps(t *testing.T, dirs ...string) []string {
	t.Helper()
	var out []string
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			if isTemp(d.Name()) {
				out = append(out, p)
				if d.IsDir() {
					return fs.SkipDir
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// copyTree copies a store with the store's modes (0700, 0600).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, durable.DirMode)
		}
		return copyData(p, to)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), durable.DirMode); err != nil {
		t.Fatal(err)
	}
	if err := copyData(src, dst); err != nil {
		t.Fatal(err)
	}
}

func copyData(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, durable.FileMode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
