// Command bench measures convkit's jobs beside reference tools doing the
// same byte work on the same data, in one run, and prints one table.
//
//	go run ./scripts/bench                   small store, a few minutes
//	go run ./scripts/bench -size ci          tiny store, under a minute (CI)
//	go run ./scripts/bench -size realistic   10,000 conversations, logs up to 256 MiB
//
// It generates a store with the fixtures package (ordinary conversations
// only; root-log sizes drawn from a log-normal mix, big logs made of tool
// output and base64 screenshots; 40% of the conversations in older format
// versions), and a sessions root in the runtime's layout of as many
// sessions drawn from the same mix (fixtures.GenerateSessions), then runs
// each job beside its reference:
//
//	migrate of the largest older log     zstd -dc | zstd -3 -T1
//	migrate of the store, 1 and 2 jobs   the same per log, xargs -P1 / -P2
//	migrate of a sessions root in the    the same per log, xargs -P1 / -P2
//	runtime's layout, 1 and 2 jobs
//	inspect --stats of the largest log   zstd -dc > /dev/null
//	reindex of the migrated store        zstd -dc (cat if plain) of every
//	                                     current log; sqlite3 importing
//	                                     the index's rows
//	backup                               tar -cf - | zstd -3 -T0
//	export of every conversation         tar -cf - conversations | zstd -3 -T0
//	import of that archive               zstd -dc | tar -xf -
//
// Times are wall-clock seconds of whole processes with a warm page cache;
// peak memory is the process tree's maximum resident set (getrusage). The
// table goes to stdout, progress to stderr. docs/PERFORMANCE.md holds the
// latest figures and the targets.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/dshroot"
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/store"
)

// sizes are the generated stores, by -size.
var sizes = map[string]struct {
	convs int
	mix   fixtures.SizeMix
}{
	"ci":        {120, fixtures.SizeMix{Median: 8 << 10, Max: 4 << 20, Sigma: 1.5}},
	"small":     {400, fixtures.SizeMix{Median: 16 << 10, Max: 32 << 20, Sigma: 1.7}},
	"realistic": {10000, fixtures.SizeMix{Median: 16 << 10, Max: 256 << 20, Sigma: 2.0}},
}

func main() {
	size := flag.String("size", "small", "store size: ci, small or realistic")
	seed := flag.Int64("seed", 8, "the store generator's seed")
	work := flag.String("work", "", "work in `DIR` and keep it, with the generated store for the next run (default: a temporary directory, removed)")
	flag.Parse()
	b := &bench{log: os.Stderr}
	if err := b.run(*size, *seed, *work); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// row is one line of the table: a convkit run or a reference run.
type row struct {
	num    int
	op     string
	files  int
	bytes  int64 // bytes the job processes (plain log bytes, or bytes on disk)
	secs   float64
	peak   int64 // KiB
	ref    *row  // the reference this run is compared with
	target float64
	note   string // printed under the table
}

type bench struct {
	log  io.Writer
	work string
	bin  string
	rows []*row
}

func (b *bench) say(format string, args ...any) {
	fmt.Fprintf(b.log, "bench: "+format+"\n", args...)
}

func (b *bench) path(name string) string { return filepath.Join(b.work, name) }

func (b *bench) run(size string, seed int64, work string) error {
	sz, ok := sizes[size]
	if !ok {
		return fmt.Errorf("-size %q: want ci, small or realistic", size)
	}
	for _, tool := range []string{"zstd", "tar", "sqlite3", "cp", "xargs", "sh", "/usr/bin/time"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is needed: %w", tool, err)
		}
	}
	if work == "" {
		dir, err := os.MkdirTemp("", "convkit-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		work = dir
	} else if err := os.MkdirAll(work, 0o700); err != nil {
		return err
	}
	b.work = work
	// Only the generated store survives from a previous run.
	ents, err := os.ReadDir(work)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if n := e.Name(); n != "store" && n != "store.done" && n != "sessions" && n != "sessions.done" {
			if err := os.RemoveAll(b.path(e.Name())); err != nil {
				return err
			}
		}
	}
	b.bin = b.path("convkit")
	b.say("building convkit")
	if out, err := exec.Command("go", "build", "-o", b.bin, "./cmd/convkit").CombinedOutput(); err != nil {
		return fmt.Errorf("go build (run from the module root): %v\n%s", err, out)
	}

	// A -work directory keeps the generated store for the next run of the
	// same size and seed; every measured run works on copies of it.
	src, done := b.path("store"), b.path("store.done")
	stamp := fmt.Sprintf("%s %d\n", size, seed)
	start := time.Now()
	if got, err := os.ReadFile(done); err == nil && string(got) == stamp {
		b.say("reusing the %s store in %s", size, src)
	} else {
		if err := errors.Join(os.Remove(done), os.RemoveAll(src)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		b.say("generating a %s store: %d conversations, root logs log-normal around %s up to %s", size, sz.convs,
			mib(sz.mix.Median), mib(sz.mix.Max))
		mix := sz.mix
		if _, err := fixtures.Generate(src, fixtures.Options{Seed: seed, Conversations: sz.convs, Sizes: &mix,
			OrdinaryOnly: true, Compression: convlog.Zstd}); err != nil {
			return fmt.Errorf("generating the store: %w", err)
		}
		if err := os.WriteFile(done, []byte(stamp), 0o600); err != nil {
			return err
		}
	}
	all, err := logsOf(src)
	if err != nil {
		return err
	}
	older := olderOf(all)
	b.say("%d logs (%d older, %s plain), ready in %.0fs", len(all), len(older), mb(sumBytes(all)),
		time.Since(start).Seconds())
	if len(older) == 0 {
		return errors.New("the generated store has no older logs to migrate")
	}
	if err := b.migrate(src, older); err != nil {
		return err
	}
	if err := b.migrateSessions(size, seed, sz.convs, sz.mix); err != nil {
		return err
	}
	// Every later job runs on the store migrated with one job: the state a
	// runtime finds after the upgrade.
	migrated := b.path("migrate-1")
	logs, err := logsOf(migrated) // read once: sizing every log decompresses it
	if err != nil {
		return err
	}
	if err := b.inspect(logs); err != nil {
		return err
	}
	if err := b.reindex(migrated, logs); err != nil {
		return err
	}
	if err := b.backup(migrated); err != nil {
		return err
	}
	if err := b.transfer(migrated); err != nil {
		return err
	}
	b.print(os.Stdout, size)
	return nil
}

// migrate times migrate on the largest older log alone, then on the whole
// store with 1 and 2 jobs, each beside zstd doing the same per log.
func (b *bench) migrate(src string, older []logFile) error {
	big := older[0]
	for _, l := range older {
		if l.bytes > big.bytes {
			big = l
		}
	}
	// A store holding only the largest older log's conversation.
	one := b.path("one")
	rel, err := filepath.Rel(src, filepath.Dir(big.path))
	if err != nil {
		return err
	}
	if err := copyTree(filepath.Join(src, rel), filepath.Join(one, rel)); err != nil {
		return err
	}
	oneLogs, err := logsOf(one)
	if err != nil {
		return err
	}
	oneOlder := olderOf(oneLogs)
	warm(oneOlder)
	b.say("migrate: the largest older log, %s plain", mb(big.bytes))
	ref, err := b.run1("zstd -dc | zstd -3 -T1, largest older log", len(oneOlder), sumBytes(oneOlder), nil, 0,
		"sh", "-c", `zstd -dcqf "$1" | zstd -3 -T1 -qf -o "$2"`, "sh", big.path, b.path("ref.zst"))
	if err != nil {
		return err
	}
	os.Remove(b.path("ref.zst"))
	if _, err := b.run1("convkit migrate, largest older log", len(oneOlder), sumBytes(oneOlder), ref, 0.85,
		b.bin, "--data-dir", one, "migrate", "--jobs", "1"); err != nil {
		return err
	}
	os.RemoveAll(one)

	// The whole store: the per-log pipeline one and two at a time, then
	// migrate with 1 and 2 jobs, each on a fresh copy.
	n, plain := len(older), sumBytes(older)
	for _, jobs := range []int{1, 2} {
		refDir := b.path("ref")
		if err := copyTree(src, refDir); err != nil {
			return err
		}
		list := b.path("older.list")
		if err := writeList(list, rebase(older, src, refDir)); err != nil {
			return err
		}
		warm(older)
		b.say("migrate: %d older logs, %d at a time", n, jobs)
		ref, err := b.run1(fmt.Sprintf("zstd -dc | zstd -3 -T1 per log, xargs -P%d", jobs), n, plain, nil, 0,
			"sh", "-c", `xargs -0 -n1 -P"$2" sh -c 'zstd -dcqf "$0" | zstd -3 -T1 -qf -o "$0.ref"' < "$1"`,
			"sh", list, fmt.Sprint(jobs))
		if err != nil {
			return err
		}
		os.RemoveAll(refDir)
		dst := b.path(fmt.Sprintf("migrate-%d", jobs))
		if err := copyTree(src, dst); err != nil {
			return err
		}
		target := 0.0
		if jobs == 2 {
			target = 1.2
		}
		if _, err := b.run1(fmt.Sprintf("convkit migrate --jobs %d, store", jobs), n, plain, ref, target,
			b.bin, "--data-dir", dst, "migrate", "--jobs", fmt.Sprint(jobs)); err != nil {
			return err
		}
		if jobs == 2 {
			os.RemoveAll(dst)
		}
	}
	return nil
}

// migrateSessions times migrate on a sessions root in the runtime's layout
// (project, session and generation directories; children found across the
// root; session.lock taken per session) with 1 and 2 jobs, each beside the
// per-log pipeline the store's migration is compared with.
func (b *bench) migrateSessions(size string, seed int64, sessions int, mix fixtures.SizeMix) error {
	src, done := b.path("sessions"), b.path("sessions.done")
	stamp := fmt.Sprintf("%s %d\n", size, seed)
	if got, err := os.ReadFile(done); err == nil && string(got) == stamp {
		b.say("reusing the %s sessions root in %s", size, src)
	} else {
		if err := errors.Join(os.Remove(done), os.RemoveAll(src)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		b.say("generating a %s sessions root in the dsh layout: %d sessions", size, sessions)
		if _, err := fixtures.GenerateSessions(context.Background(), src, fixtures.SessionsOptions{Seed: seed, Sessions: sessions,
			Sizes: &mix, OrdinaryOnly: true, Compression: convlog.Zstd}); err != nil {
			return fmt.Errorf("generating the sessions root: %w", err)
		}
		if err := os.WriteFile(done, []byte(stamp), 0o600); err != nil {
			return err
		}
	}
	all, err := sessionLogsOf(src)
	if err != nil {
		return err
	}
	older := olderOf(all)
	if len(older) == 0 {
		return errors.New("the generated sessions root has no older logs to migrate")
	}
	n, plain := len(older), sumBytes(older)
	b.say("sessions root: %d sessions (%d older, %s plain)", len(all), n, mb(plain))
	for _, jobs := range []int{1, 2} {
		refDir := b.path("ref")
		if err := copyTree(src, refDir); err != nil {
			return err
		}
		list := b.path("older.list")
		if err := writeList(list, rebase(older, src, refDir)); err != nil {
			return err
		}
		warm(older)
		b.say("migrate, dsh layout: %d older logs, %d at a time", n, jobs)
		ref, err := b.run1(fmt.Sprintf("zstd -dc | zstd -3 -T1 per log, xargs -P%d, dsh layout", jobs), n, plain, nil, 0,
			"sh", "-c", `xargs -0 -n1 -P"$2" sh -c 'zstd -dcqf "$0" | zstd -3 -T1 -qf -o "$0.ref"' < "$1"`,
			"sh", list, fmt.Sprint(jobs))
		if err != nil {
			return err
		}
		os.RemoveAll(refDir)
		dst := b.path(fmt.Sprintf("sessions-migrate-%d", jobs))
		if err := copyTree(src, dst); err != nil {
			return err
		}
		target := 0.0
		if jobs == 2 {
			target = 1.2
		}
		if _, err := b.run1(fmt.Sprintf("convkit migrate --jobs %d, dsh layout", jobs), n, plain, ref, target,
			b.bin, "migrate", "--sessions-dir", dst, "--jobs", fmt.Sprint(jobs)); err != nil {
			return err
		}
		os.RemoveAll(dst)
	}
	return nil
}

// sessionLogsOf lists every generation of every session under a sessions
// root in the runtime's layout, with its plain size.
func sessionLogsOf(root string) ([]logFile, error) {
	r, err := dshroot.Open(root)
	if err != nil {
		return nil, err
	}
	tree, err := r.Walk()
	if err != nil {
		return nil, err
	}
	var out []logFile
	for _, e := range tree.Entries {
		if e.Problem != nil {
			return nil, fmt.Errorf("%s breaks the layout: %s", e.Problem.Path, e.Problem.Reason)
		}
		s := e.Session
		for i, g := range s.Generations {
			p := filepath.Join(s.Dir, g.File)
			z := g.Compression == convlog.Zstd
			n, err := plainSize(p, z)
			if err != nil {
				return nil, err
			}
			out = append(out, logFile{path: p, version: g.Version, compressed: z, current: i == 0, bytes: n})
		}
	}
	return out, nil
}

// inspect times inspect --stats on the largest current compressed log.
func (b *bench) inspect(logs []logFile) error {
	var big logFile
	for _, l := range logs {
		if l.current && l.compressed && l.bytes > big.bytes {
			big = l
		}
	}
	if big.path == "" {
		return errors.New("no compressed log to inspect")
	}
	warm([]logFile{big})
	b.say("inspect: %s, %s plain", filepath.Base(big.path), mb(big.bytes))
	ref, err := b.run1("zstd -dc > /dev/null, largest log", 1, big.bytes, nil, 0, "zstd", "-dcq", big.path)
	if err != nil {
		return err
	}
	_, err = b.run1("convkit inspect --stats, largest log", 1, big.bytes, ref, 0.8, b.bin, "inspect", "--stats", big.path)
	return err
}

// reindex times a reindex from scratch of the store in dir (whose logs are
// logs) beside decompressing every current log, and beside sqlite3 loading
// the rows the index holds into the same schema.
func (b *bench) reindex(dir string, logs []logFile) error {
	var cur, zs, ps []logFile
	for _, l := range logs {
		if !l.current {
			continue
		}
		cur = append(cur, l)
		if l.compressed {
			zs = append(zs, l)
		} else {
			ps = append(ps, l)
		}
	}
	zl, pl := b.path("zst.list"), b.path("plain.list")
	if err := errors.Join(writeList(zl, zs), writeList(pl, ps)); err != nil {
		return err
	}
	warm(cur)
	b.say("reindex: %d current logs", len(cur))
	ref, err := b.run1("zstd -dc (cat if plain) of every current log", len(cur), sumBytes(cur), nil, 0,
		"sh", "-c", `xargs -0 -r zstd -dcq < "$1" && xargs -0 -r cat < "$2"`, "sh", zl, pl)
	if err != nil {
		return err
	}
	os.Remove(filepath.Join(dir, "metadata.db"))
	rx, err := b.run1("convkit reindex", len(cur), sumBytes(cur), ref, 1/1.5, b.bin, "--data-dir", dir, "reindex")
	if err != nil {
		return err
	}
	script, rows, err := importScript(filepath.Join(dir, "metadata.db"), b.path("rows"))
	if err != nil {
		return err
	}
	db := b.path("ref.db")
	sq, err := b.runIn([]int{0}, script, "sqlite3 importing the same rows", len(cur), sumBytes(cur), nil, 0,
		"sqlite3", "-bail", db)
	if err != nil {
		return err
	}
	os.Remove(db)
	os.RemoveAll(b.path("rows"))
	rx.note = fmt.Sprintf("reindex wrote %d rows; beside #%d plus #%d together its speed is %.2f×",
		rows, ref.num, sq.num, (ref.secs+sq.secs)/rx.secs)
	return nil
}

// importScript writes the rows of every table of the index at db (the
// full-text table through its columns, not its shadow tables) to CSV files
// in dir, and returns a sqlite3 script that creates the same schema and
// imports them in one transaction, with the number of rows.
func importScript(db, dir string) (string, int, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", 0, err
	}
	schema, err := sqlite(db, `SELECT s.type || char(9) || s.name || char(9) || replace(s.sql, char(10), ' ')
		FROM sqlite_schema s WHERE s.sql NOT NULL AND NOT EXISTS (SELECT 1 FROM sqlite_schema v
			WHERE v.sql LIKE 'CREATE VIRTUAL TABLE%' AND s.name LIKE v.name || '\_%' ESCAPE '\')
		ORDER BY s.type DESC`)
	if err != nil {
		return "", 0, err
	}
	var script strings.Builder
	var tables []string
	for _, line := range strings.Split(strings.TrimSpace(schema), "\n") {
		parts := strings.SplitN(line, "\t", 3)
		if len(parts) != 3 {
			return "", 0, fmt.Errorf("unexpected schema line %q", line)
		}
		script.WriteString(parts[2] + ";\n")
		if parts[0] == "table" {
			tables = append(tables, parts[1])
		}
	}
	script.WriteString(".mode csv\nBEGIN;\n")
	rows := 0
	for _, t := range tables {
		f := filepath.Join(dir, t+".csv")
		out, err := os.Create(f)
		if err != nil {
			return "", 0, err
		}
		cmd := exec.Command("sqlite3", "-csv", "-readonly", db, "SELECT * FROM "+t)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = out, &stderr
		err = cmd.Run()
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", 0, fmt.Errorf("sqlite3 exporting %s: %v: %s", t, err, stderr.String())
		}
		n, err := sqlite(db, "SELECT count(*) FROM "+t)
		if err != nil {
			return "", 0, err
		}
		var c int
		if _, err := fmt.Sscan(n, &c); err != nil {
			return "", 0, fmt.Errorf("counting %s: %w", t, err)
		}
		rows += c
		fmt.Fprintf(&script, ".import %s %s\n", f, t)
	}
	script.WriteString("COMMIT;\n")
	return script.String(), rows, nil
}

func sqlite(db, query string) (string, error) {
	out, err := exec.Command("sqlite3", "-readonly", db, query).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return "", fmt.Errorf("sqlite3 %s: %v: %s", db, err, ee.Stderr)
	}
	return string(out), err
}

// backup times backup beside tar | zstd of the same directory and compares
// the archive sizes.
func (b *bench) backup(dir string) error {
	files, size, err := treeSize(dir)
	if err != nil {
		return err
	}
	b.say("backup: %d files, %s on disk", files, mb(size))
	refOut, out := b.path("ref.tar.zst"), b.path("backups")
	ref, err := b.run1("tar -cf - | zstd -3 -T0, store", files, size, nil, 0,
		"sh", "-c", `tar -cf - -C "$1" . | zstd -3 -T0 -qf -o "$2"`, "sh", dir, refOut)
	if err != nil {
		return err
	}
	r, err := b.run1("convkit backup", files, size, ref, 1/1.2, b.bin, "--data-dir", dir, "backup", "--to", out)
	if err != nil {
		return err
	}
	made, err := filepath.Glob(filepath.Join(out, "*.tar.zst"))
	if err != nil || len(made) != 1 {
		return fmt.Errorf("backup --to %s: want one archive there, found %v (%v)", out, made, err)
	}
	rs, err1 := os.Stat(refOut)
	cs, err2 := os.Stat(made[0])
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	r.note = fmt.Sprintf("the backup archive is %s, tar | zstd -3 makes %s: %+.1f%% (target: within 5%%)",
		mb(cs.Size()), mb(rs.Size()), 100*(float64(cs.Size())/float64(rs.Size())-1))
	os.Remove(refOut)
	os.RemoveAll(out)
	return nil
}

// transfer times exporting every conversation and importing the archive
// into an empty store, beside tar and zstd on the same directories.
func (b *bench) transfer(dir string) error {
	tree, err := walk(dir)
	if err != nil {
		return err
	}
	archive := b.path("export.tar.zst")
	args := []string{"--data-dir", dir, "export", "--to", archive}
	for _, c := range tree.Conversations {
		args = append(args, c.ID)
	}
	files, size, err := treeSize(filepath.Join(dir, "conversations"))
	if err != nil {
		return err
	}
	b.say("export and import: %d conversations", len(tree.Conversations))
	refOut := b.path("ref.tar.zst")
	ref, err := b.run1("tar -cf - conversations | zstd -3 -T0", files, size, nil, 0,
		"sh", "-c", `tar -cf - -C "$1" conversations | zstd -3 -T0 -qf -o "$2"`, "sh", dir, refOut)
	if err != nil {
		return err
	}
	if _, err := b.run1(fmt.Sprintf("convkit export, %d conversations", len(tree.Conversations)), files, size, ref, 0,
		b.bin, args...); err != nil {
		return err
	}
	untar := b.path("untar")
	if err := os.Mkdir(untar, 0o700); err != nil {
		return err
	}
	ref, err = b.run1("zstd -dc | tar -xf -", files, size, nil, 0,
		"sh", "-c", `zstd -dcq "$1" | tar -xf - -C "$2"`, "sh", refOut, untar)
	if err != nil {
		return err
	}
	// The importing machine knows the generated agents and models; the
	// working directories do not exist here, which import reports (exit 3).
	target := b.path("imported")
	if err := os.Mkdir(target, 0o700); err != nil {
		return err
	}
	cfg := "[agents.coder]\n[agents.explorer]\n[agents.reviewer]\n[models.deepseek-flash]\n[models.deepseek-pro]\n"
	if err := os.WriteFile(filepath.Join(target, "config.toml"), []byte(cfg), 0o600); err != nil {
		return err
	}
	r, err := b.runIn([]int{0, 3}, "", "convkit import into an empty store", files, size, ref, 0,
		b.bin, "--data-dir", target, "import", archive)
	if err != nil {
		return err
	}
	r.note = "import warns that the generated working directories do not exist here (exit 3); it imports everything"
	for _, p := range []string{refOut, archive, untar, target} {
		os.RemoveAll(p)
	}
	return nil
}

// run1 runs one process that must exit 0.
func (b *bench) run1(op string, files int, size int64, ref *row, target float64, name string, args ...string) (*row, error) {
	return b.runIn([]int{0}, "", op, files, size, ref, target, name, args...)
}

// runIn runs one process to completion with stdin and records its wall time
// and peak resident set; an exit code outside ok fails the bench.
func (b *bench) runIn(ok []int, stdin, op string, files int, size int64, ref *row, target float64, name string, args ...string) (*row, error) {
	// GNU time reports the peak of the process tree it forks. Go starts
	// children by vfork, so a direct child's getrusage would count this
	// program's own memory as the child's.
	peakFile := b.path("peak")
	cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%M", "-o", peakFile, name}, args...)...)
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), io.Discard, &stderr
	start := time.Now()
	err := cmd.Run()
	secs := time.Since(start).Seconds()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	good := false
	for _, c := range ok {
		good = good || c == code
	}
	if !good {
		return nil, fmt.Errorf("%s: %s exited %d:\n%s", op, strings.Join(cmd.Args, " "), code, tail(stderr.String(), 2000))
	}
	out, err := os.ReadFile(peakFile)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the peak memory: %w", op, err)
	}
	var peak int64 // KiB
	if _, err := fmt.Sscan(lastLine(string(out)), &peak); err != nil {
		return nil, fmt.Errorf("%s: /usr/bin/time wrote %q: %w", op, out, err)
	}
	r := &row{num: len(b.rows) + 1, op: op, files: files, bytes: size, secs: secs, peak: peak, ref: ref, target: target}
	b.rows = append(b.rows, r)
	b.say("  #%d %-48s %7.2fs %10s peak", r.num, op, secs, mib(peak<<10))
	return r, nil
}

// print writes the table: one row per run; a convkit run shows its speed
// relative to the reference run it names (reference seconds / convkit
// seconds: above 1, convkit is faster).
func (b *bench) print(w io.Writer, size string) {
	host, _ := os.Hostname()
	fmt.Fprintf(w, "convkit bench -size %s: %s/%s, %d CPUs, host %s, %s, %s\n\n", size, runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), host, runtime.Version(), time.Now().UTC().Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\toperation\tfiles\tMB\tseconds\tMB/s\tfiles/s\tpeak MiB\tspeed vs ref\ttarget\tmet")
	for _, r := range b.rows {
		vs, target, met := "", "", ""
		if r.ref != nil {
			speed := r.ref.secs / r.secs
			vs = fmt.Sprintf("%.2f× #%d", speed, r.ref.num)
			if r.target > 0 {
				target, met = fmt.Sprintf("≥ %.2f×", r.target), "no"
				if speed >= r.target {
					met = "yes"
				}
			}
		}
		perSec := float64(r.files) / r.secs
		rate := fmt.Sprintf("%.0f", perSec)
		if perSec < 10 {
			rate = fmt.Sprintf("%.2f", perSec)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.1f\t%.2f\t%.1f\t%s\t%.1f\t%s\t%s\t%s\n", r.num, r.op, r.files,
			float64(r.bytes)/1e6, r.secs, float64(r.bytes)/1e6/r.secs, rate, float64(r.peak)/1024, vs, target, met)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, r := range b.rows {
		if r.note != "" {
			fmt.Fprintf(w, "#%d: %s\n", r.num, r.note)
		}
	}
	fmt.Fprintln(w, "MB: plain log bytes for migrate, inspect and reindex; bytes on disk for backup, export and import.")
	fmt.Fprintln(w, "Memory targets: migrate ≤ 64 MiB + 32 MiB per job; inspect, reindex and backup flat in log and store size.")
}

// logFile is one log file of a store.
type logFile struct {
	path       string
	version    int
	compressed bool
	current    bool  // the newest generation of its log
	bytes      int64 // plain bytes
}

// logsOf lists every generation of every log under the data dir with its
// plain size.
func logsOf(dataDir string) ([]logFile, error) {
	tree, err := walk(dataDir)
	if err != nil {
		return nil, err
	}
	if len(tree.Problems) > 0 {
		return nil, fmt.Errorf("%s has layout problems: %v", dataDir, tree.Problems)
	}
	var out []logFile
	for _, c := range tree.Conversations {
		for _, l := range c.Logs {
			for i, g := range l.Generations {
				p := filepath.Join(c.Path, g.String())
				z := g.Compression == convlog.Zstd
				n, err := plainSize(p, z)
				if err != nil {
					return nil, err
				}
				out = append(out, logFile{path: p, version: g.Version, compressed: z, current: i == 0, bytes: n})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out, nil
}

func olderOf(ls []logFile) []logFile {
	var out []logFile
	for _, l := range ls {
		if l.version < convlog.CurrentVersion {
			out = append(out, l)
		}
	}
	return out
}

func plainSize(path string, compressed bool) (int64, error) {
	if !compressed {
		fi, err := os.Stat(path)
		if err != nil {
			return 0, err
		}
		return fi.Size(), nil
	}
	cmd := exec.Command("zstd", "-dcq", path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, out)
	if werr := cmd.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		return 0, fmt.Errorf("zstd -dc %s: %w", path, err)
	}
	return n, nil
}

func sumBytes(ls []logFile) int64 {
	var n int64
	for _, l := range ls {
		n += l.bytes
	}
	return n
}

// rebase moves the paths of ls from under one directory to under another.
func rebase(ls []logFile, from, to string) []logFile {
	out := make([]logFile, len(ls))
	for i, l := range ls {
		rel, _ := filepath.Rel(from, l.path)
		l.path = filepath.Join(to, rel)
		out[i] = l
	}
	return out
}

// writeList writes the paths NUL-separated, for xargs -0.
func writeList(path string, ls []logFile) error {
	var buf bytes.Buffer
	for _, l := range ls {
		buf.WriteString(l.path)
		buf.WriteByte(0)
	}
	return os.WriteFile(path, buf.Bytes(), 0o600)
}

// warm reads the files so that every run reads from the page cache.
func warm(ls []logFile) {
	for _, l := range ls {
		if f, err := os.Open(l.path); err == nil {
			io.Copy(io.Discard, bufio.NewReaderSize(f, 1<<20))
			f.Close()
		}
	}
}

// treeSize counts the regular files under dir and their bytes, reading
// them on the way to warm the page cache.
func treeSize(dir string) (files int, size int64, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		n, err := io.Copy(io.Discard, f)
		files++
		size += n
		return err
	})
	return files, size, err
}

// copyTree copies from to the new path to, replacing what a previous run
// left there (cp -a into an existing directory would nest the copy).
func copyTree(from, to string) error {
	if err := os.RemoveAll(to); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		return fmt.Errorf("cp -a %s %s: %v: %s", from, to, err, out)
	}
	return nil
}

// lastLine is the last non-empty line of s (GNU time puts a "Command
// exited with non-zero status" line before the figure).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
func mib(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// walk lists the conversations of the store in dataDir, opened read-only.
func walk(dataDir string) (*store.Tree, error) {
	s, err := store.Open(context.Background(), dataDir, store.OpenOptions{})
	if err != nil {
		return nil, err
	}
	return s.Walk()
}
