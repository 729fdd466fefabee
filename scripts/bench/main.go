// Command bench measures convkit's jobs beside reference tools doing the
// same byte work on the same data, in one run, and prints one table with
// each target and whether it is met.
//
//	go run ./scripts/bench                   small store, a few minutes
//	go run ./scripts/bench -size ci          tiny store, under a minute (CI)
//	go run ./scripts/bench -size realistic   10,000 conversations, logs up to 256 MiB (about 30 minutes)
//
// It generates large older logs with scripts/genlog's generator (long
// tool-output lines, many short text lines, and lines of every length;
// each in the writer's frames and in one frame as the zstd tool writes
// it), a store with the fixtures package (ordinary conversations;
// root-log sizes drawn from a log-normal mix, big logs made of tool output
// and base64 screenshots; 40% of the conversations in older format
// versions), a sessions root in the runtime's layout of as many sessions
// drawn from the same mix (fixtures.GenerateSessions), a store of small
// logs, a store of small and medium logs that conversations are moved
// from (3,000 conversations but in ci) and, for the backup's memory, a
// store of many files cloned from a generated one. Then it runs each job
// beside its reference:
//
//	migrate of each large log            zstd -dc | zstd -3 -T1
//	inspect --stats and --validate of    zstd -dc > /dev/null
//	  each successor (each log in one
//	  frame: the log itself)
//	migrate of the store, 1 and 2 jobs   the same per log, xargs -P1 / -P2
//	migrate of a sessions root in the    the same per log, xargs -P1 / -P2
//	  runtime's layout, 1 and 2 jobs
//	migrate of the store of small logs   an empty store (the fixed cost per log)
//	reindex of the migrated store and    zstd -dc (cat if plain) of every
//	  of the store moved from            current log, then sqlite3 loading
//	                                     the index's rows
//	reindex --incremental                nothing changed; 1% and 10% of the
//	                                     conversations renamed; 10% with a
//	                                     turn appended to the root session
//	backup                               tar -cf - | zstd -3 -T0
//	scripts/restic-backup.sh             what each snapshot adds to a real
//	                                     restic repository: the first, the
//	                                     store unchanged, after 1% of the
//	                                     conversations gained a turn (at
//	                                     random, then the same again)
//	export of every conversation of      tar -cf - conversations | zstd -3 -T0
//	  the store moved from
//	import of that archive               a move by hand: zstd -dc | tar -xf -,
//	                                     then convkit reindex
//
// The strict read's CPU (inspect --stats: decoding, the frame, envelope
// and JSON checks) is set beside the reference's on each large log, and
// the peak memory of migrate and inspect beside their budgets.
//
// Each convkit run and its reference run alternate, repeated (-runs) when
// a round is short; the table shows the median wall and CPU time (user +
// system of the whole process tree, every process of a pipeline), the
// spread of the ratios over the rounds, the ratio of CPU times and the
// process tree's peak resident set (GNU time); the load average is
// printed at the start and the end. The table goes to stdout, progress to stderr. -convkit runs a
// given binary instead of building this tree (to measure an older build
// on the same data: rows it cannot run say so). What a round leaves (a
// copied store, an extraction) is renamed aside, not removed, until the
// run ends (see setAside): the realistic run needs several GB of disk
// beyond its data. docs/PERFORMANCE.md holds the latest figures.
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
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/internal/dshroot"
	"github.com/convkit/convkit/store"
	"github.com/klauspost/compress/zstd"
)

// spec is what one -size generates.
type spec struct {
	convs int
	mix   fixtures.SizeMix
	// long and short are the plain sizes of the two large older logs.
	long, short int64
	// small is the conversations of the store of small logs (the fixed
	// cost per log).
	small int
	// medium and mediumMix make the store conversations are moved from
	// (export, import and its full rebuild): small and medium logs.
	medium    int
	mediumMix fixtures.SizeMix
	// manyFiles are the file counts of stores cloned for the backup's
	// memory (besides the store itself).
	manyFiles []int
	// runs is the most rounds of a short measurement; rounds stop once
	// they have taken budget seconds.
	runs   int
	budget float64
}

var sizes = map[string]spec{
	"ci": {convs: 120, mix: fixtures.SizeMix{Median: 8 << 10, Max: 4 << 20, Sigma: 1.5},
		long: 4 << 20, short: 2 << 20, small: 200, medium: 100, mediumMix: mediumMix, runs: 1, budget: 0},
	"small": {convs: 400, mix: fixtures.SizeMix{Median: 16 << 10, Max: 32 << 20, Sigma: 1.7},
		long: 64 << 20, short: 64e6, small: 1000, medium: 3000, mediumMix: mediumMix, manyFiles: []int{30000}, runs: 5, budget: 20},
	"realistic": {convs: 10000, mix: fixtures.SizeMix{Median: 16 << 10, Max: 256 << 20, Sigma: 2.0},
		long: 256 << 20, short: 200e6, small: 4000, medium: 3000, mediumMix: mediumMix, manyFiles: []int{300000}, runs: 3, budget: 15},
}

// mediumMix is the size of the root logs of the store conversations are
// moved from: small and medium, none over 2 MiB.
var mediumMix = fixtures.SizeMix{Median: 12 << 10, Max: 2 << 20, Sigma: 1.3}

func main() {
	size := flag.String("size", "small", "store size: ci, small or realistic")
	seed := flag.Int64("seed", 8, "the generators' seed")
	work := flag.String("work", "", "work in `DIR` and keep it, with the generated data for the next run (default: a temporary directory, removed)")
	bin := flag.String("convkit", "", "measure this convkit `binary` instead of building ./cmd/convkit")
	runs := flag.Int("runs", 0, "at most `N` rounds of each short measurement (default: by size)")
	only := flag.String("only", "", "run only these comma-separated `parts`: migrate, inspect, store, dsh, small, reindex, backup, transfer (the store moved from: its rebuild, export and import)")
	files := flag.String("files", "", "the file counts of the stores of many files the backup's memory is measured on, comma-separated (default: by size)")
	flag.Parse()
	sp, ok := sizes[*size]
	if !ok {
		fmt.Fprintf(os.Stderr, "bench: -size %q: want ci, small or realistic\n", *size)
		os.Exit(2)
	}
	if *runs > 0 {
		sp.runs = *runs
	}
	if *files != "" {
		sp.manyFiles = nil
		for _, f := range strings.Split(*files, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n <= 0 {
				fmt.Fprintf(os.Stderr, "bench: -files %q: want positive whole numbers\n", *files)
				os.Exit(2)
			}
			sp.manyFiles = append(sp.manyFiles, n)
		}
	}
	b := &bench{log: os.Stderr, spec: sp, size: *size, seed: *seed, bin: *bin}
	if *only != "" {
		b.only = strings.Split(*only, ",")
	}
	if err := b.run(*work); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// A target is what a row must reach; zero kind: none.
type target struct {
	kind  targetKind
	value float64
}

type targetKind int

const (
	noTarget    targetKind = iota
	minSpeed               // reference seconds over convkit seconds, at least value
	maxSecs                // seconds, at most value
	maxPeak                // peak MiB, at most value
	maxPerLog              // milliseconds per log, at most value
	maxCPURatio            // convkit's CPU seconds over the reference's, at most value
	maxPercent             // a derived percentage, at most value
)

func (t target) String() string {
	switch t.kind {
	case minSpeed:
		return fmt.Sprintf("≥ %.2f×", t.value)
	case maxSecs:
		return "≤ " + secs(t.value)
	case maxPeak:
		return fmt.Sprintf("≤ %.0f MiB", t.value)
	case maxPerLog:
		return fmt.Sprintf("≤ %.1f ms", t.value)
	case maxCPURatio:
		return fmt.Sprintf("≤ %.1f× CPU", t.value)
	case maxPercent:
		return fmt.Sprintf("≤ %.0f%%", t.value)
	}
	return ""
}

// secs formats a time that a maxSecs target compares: to the millisecond
// under 1 s, where rounding to hundredths would show a miss as "0.02 s ≤
// 0.02 s".
func secs(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%.3f s", v)
	}
	return fmt.Sprintf("%.2f s", v)
}

// row is one line of the table: a measured run (convkit's or a
// reference's), or a figure derived from others (derived is set).
type row struct {
	num    int
	op     string
	files  int
	bytes  int64 // bytes the job processes (plain log bytes, or bytes on disk)
	secs   []float64
	cpus   []float64 // CPU seconds (user + system) of the process tree
	peaks  []int64   // KiB
	ref    *row      // the reference this run is compared with
	target target
	note   string // printed under the table
	// derived rows show result and met instead of measurements.
	derived bool
	result  string
	value   float64
	// missing: the binary measured cannot run this job (an older build).
	missing string
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (r *row) med() float64 { return median(r.secs) }

// cpu is the median CPU seconds of the runs.
func (r *row) cpu() float64 { return median(r.cpus) }

// cpuSpeed is the reference's median CPU seconds over this row's: the
// ratio that load on the machine moves least.
func (r *row) cpuSpeed() float64 { return r.ref.cpu() / r.cpu() }

func (r *row) peak() int64 {
	var p int64
	for _, v := range r.peaks {
		p = max(p, v)
	}
	return p
}

// speed is the reference's median seconds over this row's.
func (r *row) speed() float64 { return r.ref.med() / r.med() }

// spread is the range of the per-round ratios against the reference.
func (r *row) spread() (lo, hi float64) {
	n := min(len(r.secs), len(r.ref.secs))
	lo, hi = 1e18, 0
	for i := 0; i < n; i++ {
		v := r.ref.secs[i] / r.secs[i]
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

// met is "yes", "no" or "" (no target, or nothing measured).
func (r *row) met() string {
	if r.target.kind == noTarget || r.missing != "" {
		return ""
	}
	var ok bool
	switch r.target.kind {
	case minSpeed:
		ok = r.speed() >= r.target.value
	case maxSecs:
		ok = r.med() <= r.target.value
	case maxPeak:
		if r.derived {
			ok = r.value <= r.target.value
		} else {
			ok = float64(r.peak())/1024 <= r.target.value
		}
	case maxPerLog, maxCPURatio, maxPercent:
		ok = r.value <= r.target.value
	}
	if ok {
		return "yes"
	}
	return "no"
}

type bench struct {
	log  io.Writer
	spec spec
	size string
	seed int64
	only []string
	work string
	bin  string
	tmp  string // TMPDIR of every measured process
	// trash holds what rounds made and no longer need, until the run
	// ends (setAside); set is how many were set aside.
	trash string
	set   int
	rows  []*row
	// load is the load average before and after the run.
	load [2]string
}

func (b *bench) say(format string, args ...any) {
	fmt.Fprintf(b.log, "bench: "+format+"\n", args...)
}

func (b *bench) path(name string) string { return filepath.Join(b.work, name) }

func (b *bench) doing(part string) bool { return len(b.only) == 0 || slices.Contains(b.only, part) }

func (b *bench) run(work string) error {
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
	// Only generated data (gen-*) survives from a previous run.
	ents, err := os.ReadDir(work)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "gen-") {
			if err := os.RemoveAll(b.path(e.Name())); err != nil {
				return err
			}
		}
	}
	b.tmp = b.path("tmp")
	if err := os.Mkdir(b.tmp, 0o700); err != nil {
		return err
	}
	if b.bin == "" {
		b.bin = b.path("convkit")
		b.say("building convkit")
		if out, err := exec.Command("go", "build", "-o", b.bin, "./cmd/convkit").CombinedOutput(); err != nil {
			return fmt.Errorf("go build (run from the module root): %v\n%s", err, out)
		}
	} else if b.bin, err = filepath.Abs(b.bin); err != nil {
		return err
	}
	b.trash = b.path("trash")
	defer os.RemoveAll(b.trash)
	b.load[0] = loadAvg()

	if b.doing("migrate") || b.doing("inspect") {
		if err := b.largeLogs(); err != nil {
			return err
		}
	}
	var src string
	if b.doing("store") || b.doing("reindex") || b.doing("backup") {
		if src, err = b.genStore(); err != nil {
			return err
		}
	}
	if b.doing("store") {
		if err := b.migrateStore(src); err != nil {
			return err
		}
	}
	if b.doing("dsh") {
		if err := b.migrateSessions(); err != nil {
			return err
		}
	}
	if b.doing("small") {
		if err := b.smallLogs(); err != nil {
			return err
		}
	}
	if b.doing("reindex") || b.doing("backup") {
		// Every later job runs on the store migrated: the state a
		// runtime finds after the upgrade.
		migrated, err := b.migrated(src, "migrated")
		if err != nil {
			return err
		}
		if b.doing("reindex") {
			if err := b.reindex(migrated, true); err != nil {
				return err
			}
		}
		if b.doing("backup") {
			if err := b.backup(migrated); err != nil {
				return err
			}
			if err := b.restic(migrated); err != nil {
				return err
			}
		}
	}
	if b.doing("transfer") {
		// Moving conversations: a store of small and medium logs.
		gen, err := b.genMedium()
		if err != nil {
			return err
		}
		moved, err := b.migrated(gen, "medium")
		if err != nil {
			return err
		}
		if err := b.reindex(moved, false); err != nil {
			return err
		}
		if err := b.transfer(moved); err != nil {
			return err
		}
	}
	b.load[1] = loadAvg()
	b.print(os.Stdout)
	return nil
}

// cmd runs a setup command that must succeed.
func (b *bench) cmd(name string, args ...string) error {
	c := exec.Command(name, args...)
	c.Env = append(os.Environ(), "TMPDIR="+b.tmp)
	out, err := c.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(string(out), 2000))
	}
	return nil
}

// cached runs gen unless a previous run in the same -work directory left
// what it makes at path for the same stamp.
func (b *bench) cached(path, stamp string, gen func(string) error) error {
	done := path + ".done"
	if got, err := os.ReadFile(done); err == nil && string(got) == stamp {
		b.say("reusing %s", path)
		return nil
	}
	if err := errors.Join(os.Remove(done), os.RemoveAll(path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	start := time.Now()
	if err := gen(path); err != nil {
		return err
	}
	b.say("  generated in %.0fs", time.Since(start).Seconds())
	return os.WriteFile(done, []byte(stamp), 0o600)
}

// largeLogs times migrate of each large older log (long, short and mixed
// lines; the writer's frames, and one frame as the zstd tool writes it),
// then inspect of the log: of the successor of a log in the writer's
// frames, of the log itself when it is one frame.
func (b *bench) largeLogs() error {
	for _, kind := range []fixtures.LineKind{fixtures.LongLines, fixtures.ShortLines, fixtures.MixedLines} {
		for _, one := range []bool{false, true} {
			if err := b.largeLog(kind, one); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *bench) largeLog(kind fixtures.LineKind, one bool) error {
	size := b.spec.long
	if kind != fixtures.LongLines {
		size = b.spec.short
	}
	framing, genName := "the writer's frames", "gen-"+kind.String()
	if one {
		framing, genName = "one frame", genName+"-one"
	}
	gen := b.path(genName)
	log := filepath.Join(gen, "conversations", "c", "large.v3.jsonl.zst")
	err := b.cached(gen, fmt.Sprintf("%s %d %d named %v\n", kind, size, b.seed, one), func(dir string) error {
		b.say("generating a v3 log of %s lines in %s, %s plain", kind, framing, mb(size))
		// Session "large", as its file name says.
		if one {
			return fixtures.LargeLogOneFrame(log, "large", 3, kind, size, b.seed)
		}
		return fixtures.LargeLogOf(log, "large", 3, convlog.Zstd, kind, size, b.seed)
	})
	if err != nil {
		return err
	}
	lf := []logFile{{path: log, compressed: true}}
	plain, err := plainSize(log, true)
	if err != nil {
		return err
	}
	lines, err := lineCount(log)
	if err != nil {
		return err
	}
	// Migrate in a copy of the store, the successor removed before
	// each round.
	dir := b.path("large")
	if err := b.copyTree(gen, dir); err != nil {
		return err
	}
	clog := filepath.Join(dir, "conversations", "c", "large.v3.jsonl.zst")
	succ := filepath.Join(dir, "conversations", "c", "large.v4.jsonl.zst")
	warm(lf)
	name := fmt.Sprintf("%s-line log in %s (%d lines)", kind, framing, lines)
	b.say("migrate: the %s, %s plain", name, mb(plain))
	if b.doing("migrate") {
		ref := &row{op: "zstd -dc | zstd -3 -T1, " + name, files: 1, bytes: plain}
		cv := &row{op: "convkit migrate --jobs 1, " + name, files: 1, bytes: plain, ref: ref, target: target{minSpeed, 0.85}}
		err := b.pair(ref, cv, func() error { return os.RemoveAll(b.path("ref.zst")) },
			func() error { return removeIfAny(succ) },
			[]string{"sh", "-c", `zstd -dcqf "$1" | zstd -3 -T1 -qf -o "$2"`, "sh", clog, b.path("ref.zst")},
			[]string{b.bin, "--data-dir", dir, "migrate", "--jobs", "1"})
		if err != nil {
			return err
		}
		os.Remove(b.path("ref.zst"))
		b.add(&row{op: fmt.Sprintf("migrate's peak memory, %s-line log in %s (#%d)", kind, framing, cv.num), derived: true,
			value: float64(cv.peak()) / 1024, result: mib(cv.peak() << 10), target: target{maxPeak, 96}})
	}
	if b.doing("inspect") {
		// A log in the writer's frames is read as its successor (the
		// log a store holds after the upgrade); one frame as it is.
		read, what := clog, "the log itself"
		if !one {
			if _, err := os.Stat(succ); err != nil {
				if err := b.cmd(b.bin, "--data-dir", dir, "-q", "migrate", "--jobs", "1"); err != nil {
					return err
				}
			}
			read, what = succ, "its v4 successor"
		}
		warm([]logFile{{path: read, compressed: true}})
		ref := &row{op: fmt.Sprintf("zstd -dc > /dev/null, %s (%s-line, %s)", what, kind, framing), files: 1, bytes: plain}
		steps := []step{{r: ref, args: []string{"sh", "-c", `exec zstd -dcq "$1" > /dev/null`, "sh", read}}}
		var stats *row
		for _, mode := range []string{"--stats", "--validate"} {
			cv := &row{op: fmt.Sprintf("convkit inspect %s, the same", mode), files: 1, bytes: plain, ref: ref,
				target: target{minSpeed, 0.8}}
			if stats == nil {
				stats = cv
			}
			steps = append(steps, step{r: cv, args: []string{b.bin, "inspect", mode, read}})
		}
		if err := b.rounds(steps...); err != nil {
			return err
		}
		if stats.missing == "" {
			ratio := stats.cpu() / ref.cpu()
			b.add(&row{op: fmt.Sprintf("the strict read's CPU: #%d CPU s / #%d CPU s", stats.num, ref.num), derived: true,
				value: ratio, result: fmt.Sprintf("%.2f×", ratio), target: target{maxCPURatio, 1.5},
				note: "inspect --stats reads the log strictly (decoding, frame and envelope checks, the JSON check of every line) and nothing more"})
			b.add(&row{op: fmt.Sprintf("inspect's peak memory (#%d, #%d)", stats.num, stats.num+1), derived: true,
				value:  float64(max(stats.peak(), b.rows[stats.num].peak())) / 1024,
				result: mib(max(stats.peak(), b.rows[stats.num].peak()) << 10), target: target{maxPeak, 64}})
		}
	}
	return b.setAside(dir)
}

// migrated copies the store in src to the new directory name and migrates
// it with two jobs.
func (b *bench) migrated(src, name string) (string, error) {
	dir := b.path(name)
	if err := b.copyTree(src, dir); err != nil {
		return "", err
	}
	if err := b.cmd(b.bin, "--data-dir", dir, "-q", "migrate", "--jobs", "2"); err != nil {
		return "", fmt.Errorf("migrating %s: %w", src, err)
	}
	return dir, nil
}

// genMedium generates (or reuses) the store of small and medium logs that
// conversations are moved from, and returns its directory.
func (b *bench) genMedium() (string, error) {
	gen := b.path("gen-medium")
	mix := b.spec.mediumMix
	err := b.cached(gen, fmt.Sprintf("%s %d %d\n", b.size, b.spec.medium, b.seed), func(dir string) error {
		b.say("generating a store of %d conversations of small and medium logs: root logs log-normal around %s up to %s",
			b.spec.medium, mib(mix.Median), mib(mix.Max))
		_, err := fixtures.Generate(dir, fixtures.Options{Seed: b.seed + 1, Conversations: b.spec.medium, Sizes: &mix,
			OrdinaryOnly: true, Compression: convlog.Zstd})
		return err
	})
	return gen, err
}

// genStore generates (or reuses) the store and returns its directory.
func (b *bench) genStore() (string, error) {
	src := b.path("gen-store")
	mix := b.spec.mix
	err := b.cached(src, fmt.Sprintf("%s %d\n", b.size, b.seed), func(dir string) error {
		b.say("generating a %s store: %d conversations, root logs log-normal around %s up to %s", b.size, b.spec.convs,
			mib(mix.Median), mib(mix.Max))
		_, err := fixtures.Generate(dir, fixtures.Options{Seed: b.seed, Conversations: b.spec.convs, Sizes: &mix,
			OrdinaryOnly: true, Compression: convlog.Zstd})
		return err
	})
	return src, err
}

// migrateStore times migrate of the whole store with 1 and 2 jobs, each
// beside zstd doing the same per older log.
func (b *bench) migrateStore(src string) error {
	all, err := logsOf(src)
	if err != nil {
		return err
	}
	older := olderOf(all)
	if len(older) == 0 {
		return errors.New("the generated store has no older logs to migrate")
	}
	n, plain := len(older), sumBytes(older)
	b.say("migrate: the store, %d logs, %d older (%s plain)", len(all), n, mb(plain))
	refDir, dst := b.path("ref"), b.path("migrate")
	list := b.path("older.list")
	if err := writeList(list, rebase(older, src, refDir)); err != nil {
		return err
	}
	for _, jobs := range []int{1, 2} {
		ref := &row{op: fmt.Sprintf("zstd -dc | zstd -3 -T1 per older log, xargs -P%d", jobs), files: n, bytes: plain}
		cv := &row{op: fmt.Sprintf("convkit migrate --jobs %d, store", jobs), files: n, bytes: plain, ref: ref}
		if jobs == 2 {
			cv.target = target{minSpeed, 1.2}
		}
		err := b.pair(ref, cv,
			func() error { err := b.copyTree(src, refDir); warm(older); return err },
			func() error { return b.copyTree(src, dst) },
			[]string{"sh", "-c", `xargs -0 -n1 -P"$2" sh -c 'zstd -dcqf "$0" | zstd -3 -T1 -qf -o "$0.ref"' < "$1"`,
				"sh", list, fmt.Sprint(jobs)},
			[]string{b.bin, "--data-dir", dst, "migrate", "--jobs", fmt.Sprint(jobs)})
		if err != nil {
			return err
		}
	}
	return errors.Join(b.setAside(refDir), b.setAside(dst))
}

// migrateSessions times migrate on a sessions root in the runtime's layout
// (project, session and generation directories; children found across the
// root; session.lock taken per session) with 1 and 2 jobs, each beside the
// per-log pipeline the store's migration is compared with.
func (b *bench) migrateSessions() error {
	src := b.path("gen-sessions")
	mix := b.spec.mix
	err := b.cached(src, fmt.Sprintf("%s %d\n", b.size, b.seed), func(dir string) error {
		b.say("generating a %s sessions root in the runtime's layout: %d sessions", b.size, b.spec.convs)
		_, err := fixtures.GenerateSessions(context.Background(), dir, fixtures.SessionsOptions{Seed: b.seed,
			Sessions: b.spec.convs, Sizes: &mix, OrdinaryOnly: true, Compression: convlog.Zstd})
		return err
	})
	if err != nil {
		return err
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
	b.say("migrate, the runtime's layout: %d sessions (%d older, %s plain)", len(all), n, mb(plain))
	refDir, dst := b.path("ref"), b.path("sessions")
	list := b.path("older.list")
	if err := writeList(list, rebase(older, src, refDir)); err != nil {
		return err
	}
	for _, jobs := range []int{1, 2} {
		ref := &row{op: fmt.Sprintf("zstd -dc | zstd -3 -T1 per older log, xargs -P%d, runtime's layout", jobs), files: n, bytes: plain}
		cv := &row{op: fmt.Sprintf("convkit migrate --jobs %d, runtime's layout", jobs), files: n, bytes: plain, ref: ref}
		if jobs == 2 {
			cv.target = target{minSpeed, 1.2}
		}
		err := b.rounds(
			step{r: ref, prep: func() error { err := b.copyTree(src, refDir); warm(older); return err },
				args: []string{"sh", "-c", `xargs -0 -n1 -P"$2" sh -c 'zstd -dcqf "$0" | zstd -3 -T1 -qf -o "$0.ref"' < "$1"`,
					"sh", list, fmt.Sprint(jobs)}},
			step{r: cv, prep: func() error { return b.copyTree(src, dst) }, missingIf: "not a sessions root convkit knows",
				args: []string{b.bin, "migrate", "--sessions-dir", dst, "--jobs", fmt.Sprint(jobs)}})
		if err != nil {
			return err
		}
	}
	return errors.Join(b.setAside(refDir), b.setAside(dst))
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

// smallLogs times migrate of a store of small logs beside migrate of an
// empty store: the difference per log is migrate's fixed cost per log.
func (b *bench) smallLogs() error {
	gen := b.path("gen-small")
	err := b.cached(gen, fmt.Sprintf("%d %d\n", b.spec.small, b.seed), func(dir string) error {
		b.say("generating a store of %d conversations of small logs", b.spec.small)
		_, err := fixtures.Generate(dir, fixtures.Options{Seed: b.seed, Conversations: b.spec.small, OrdinaryOnly: true,
			Compression: convlog.Zstd})
		return err
	})
	if err != nil {
		return err
	}
	all, err := logsOf(gen)
	if err != nil {
		return err
	}
	older := olderOf(all)
	empty, dst := b.path("empty"), b.path("small")
	if err := os.MkdirAll(filepath.Join(empty, "conversations"), 0o700); err != nil {
		return err
	}
	b.say("migrate: %d small logs (%d older, %s plain)", len(all), len(older), mb(sumBytes(all)))
	base := &row{op: "convkit migrate, empty store", files: 0, bytes: 0}
	cv := &row{op: fmt.Sprintf("convkit migrate --jobs 1, %d small logs (%d older)", len(all), len(older)),
		files: len(all), bytes: sumBytes(all)}
	err = b.pair(base, cv, nil, func() error { return b.copyTree(gen, dst) },
		[]string{b.bin, "--data-dir", empty, "migrate", "--jobs", "1"},
		[]string{b.bin, "--data-dir", dst, "migrate", "--jobs", "1"})
	if err != nil {
		return err
	}
	perLog := (cv.med() - base.med()) / float64(len(all)) * 1000
	b.add(&row{op: "migrate's fixed cost per log: (#" + fmt.Sprint(cv.num) + " − #" + fmt.Sprint(base.num) + ") / logs",
		derived: true, value: perLog, result: fmt.Sprintf("%.2f ms", perLog), target: target{maxPerLog, 1},
		note: fmt.Sprintf("the logs are %s on average; every one is read and checked, the %d older ones upgraded, fsynced and published",
			kb(sumBytes(all)/int64(len(all))), len(older))})
	return errors.Join(b.setAside(empty), b.setAside(dst))
}

// reindex times a full rebuild of the store in dir beside decompressing
// every current log and sqlite3 loading the rows the index holds, then,
// with incremental, incremental runs after changing none, 1% and 10% of
// the conversations (renamed), and 10% again with a new turn each.
func (b *bench) reindex(dir string, incremental bool) error {
	logs, err := logsOf(dir)
	if err != nil {
		return err
	}
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
	rx, err := b.fullRebuild(dir, zl, pl, cur)
	if err != nil {
		return err
	}
	if !incremental {
		return nil
	}

	// Incremental: the index the full run left is current.
	tree, err := walk(dir)
	if err != nil {
		return err
	}
	n := len(tree.Conversations)
	noop := &row{op: fmt.Sprintf("convkit reindex --incremental, nothing changed (%d conversations)", n),
		files: len(cur), target: target{maxSecs, 1}}
	if err := b.measure(noop, "", nil, nil, b.bin, "--data-dir", dir, "reindex", "--incremental"); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(uint64(b.seed), 7))
	round := 0
	for _, ch := range []struct {
		pct        int
		turn       bool
		what, note string
	}{
		{1, false, "changed", "each changed conversation was renamed (one event appended to its conversation log)"},
		{10, false, "changed", "each changed conversation was renamed (one event appended to its conversation log)"},
		{10, true, "with a new turn", "each changed conversation's root session gained a turn (a prompt and an answer) as the runtime writes it"},
	} {
		k := max(1, n*ch.pct/100)
		r := &row{op: fmt.Sprintf("convkit reindex --incremental, %d%% (%d) %s", ch.pct, k, ch.what), files: k}
		if noop.missing == "" {
			r.target = target{maxSecs, noop.med() + 2*float64(k)/float64(n)*rx.med()}
		}
		change := func() error {
			round++
			if ch.turn {
				return appendTurns(dir, tree, rng, k, round)
			}
			return renameSome(dir, tree, rng, k, round)
		}
		if err := b.measure(r, "", nil, change, b.bin, "--data-dir", dir, "reindex", "--incremental"); err != nil {
			return err
		}
		r.note = fmt.Sprintf("target: the no-op (#%d) plus twice a full rebuild's time per conversation (#%d) for each changed one; %s",
			noop.num, rx.num, ch.note)
	}
	return nil
}

// fullRebuild times a full rebuild of the store in dir beside its
// reference: decompressing every current log (zl and pl list them,
// compressed and plain) and sqlite3 loading the rows the index holds from
// a dump of it, in one process tree.
func (b *bench) fullRebuild(dir, zl, pl string, cur []logFile) (*row, error) {
	db := filepath.Join(dir, "metadata.db")
	// The rows sqlite3 loads are those a rebuild writes.
	if err := errors.Join(removeIndex(db), b.cmd(b.bin, "--data-dir", dir, "-q", "reindex")); err != nil {
		return nil, fmt.Errorf("the first rebuild: %w", err)
	}
	script, rows, err := importScript(db, b.path("rows"))
	if err != nil {
		return nil, err
	}
	sqlFile, refDB := b.path("rows.sql"), b.path("ref.db")
	if err := os.WriteFile(sqlFile, []byte(script), 0o600); err != nil {
		return nil, err
	}
	ref := &row{op: "zstd -dc (cat if plain) of every current log, then sqlite3 loading the index's rows", files: len(cur), bytes: sumBytes(cur)}
	rx := &row{op: "convkit reindex", files: len(cur), bytes: sumBytes(cur), ref: ref, target: target{minSpeed, 1}}
	err = b.rounds(
		step{r: ref, prep: func() error { return os.RemoveAll(refDB) },
			args: []string{"sh", "-c", `xargs -0 -r zstd -dcq < "$1" > /dev/null && xargs -0 -r cat < "$2" > /dev/null && exec sqlite3 -bail "$3" < "$4"`,
				"sh", zl, pl, refDB, sqlFile}},
		step{r: rx, ok: []int{0, 3}, prep: func() error { return removeIndex(db) }, args: []string{b.bin, "--data-dir", dir, "reindex"}})
	if err != nil {
		return nil, err
	}
	rx.note = fmt.Sprintf("reindex wrote %d rows; the reference loads the same rows, from CSV files of a dump of the index", rows)
	return rx, errors.Join(os.Remove(refDB), os.Remove(sqlFile), os.RemoveAll(b.path("rows")))
}

// appendTurns appends a turn to the root session of k conversations of
// tree picked at random, through the store's runtime API (the index is
// left as it was): the prompt and one step with a model answer. A
// conversation the runtime would not open for writing is passed over.
func appendTurns(dir string, tree *store.Tree, rng *rand.Rand, k, round int) error {
	s, err := store.Open(context.Background(), dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		return err
	}
	defer s.Close()
	done := 0
	var firstErr error
	for _, i := range rng.Perm(len(tree.Conversations)) {
		if done == k {
			return nil
		}
		if err := fixtures.AppendTurn(s, tree.Conversations[i].ID, round); err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("conversation %s: %w", tree.Conversations[i].ID, err)
			}
			continue
		}
		done++
	}
	if done < k {
		return fmt.Errorf("a turn was appended to %d conversations of %d; the first refused: %w", done, k, firstErr)
	}
	return nil
}

// removeIndex removes metadata.db and its write-ahead log.
func removeIndex(db string) error { return removeIfAny(db, db+"-wal", db+"-shm") }

// removeIfAny removes the files that exist of paths.
func removeIfAny(paths ...string) error {
	var errs []error
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// renameSome appends a rename to k conversations of tree picked at
// random, through the store (the index is left as it was).
func renameSome(dir string, tree *store.Tree, rng *rand.Rand, k, round int) error {
	s, err := store.Open(context.Background(), dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		return err
	}
	defer s.Close()
	for _, i := range rng.Perm(len(tree.Conversations))[:k] {
		if err := s.Rename(tree.Conversations[i].ID, fmt.Sprintf("renamed by the bench, round %d", round)); err != nil {
			return err
		}
	}
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

// backup times backup beside tar | zstd of the same directory, compares
// the archive sizes, and measures the backup's memory on the stores of
// many files.
func (b *bench) backup(dir string) error {
	files, size, err := treeSize(dir)
	if err != nil {
		return err
	}
	b.say("backup: %d files, %s on disk", files, mb(size))
	refOut, out := b.path("ref.tar.zst"), b.path("backups")
	ref := &row{op: "tar -cf - | zstd -3 -T0, store", files: files, bytes: size}
	cv := &row{op: "convkit backup", files: files, bytes: size, ref: ref, target: target{minSpeed, 1 / 1.2}}
	err = b.pair(ref, cv, nil, func() error { return os.RemoveAll(out) },
		[]string{"sh", "-c", `tar -cf - -C "$1" . | zstd -3 -T0 -qf -o "$2"`, "sh", dir, refOut},
		[]string{b.bin, "--data-dir", dir, "backup", "--to", out})
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
	cv.note = fmt.Sprintf("the backup archive is %s, tar | zstd -3 makes %s: %+.1f%% (target: within 5%%)",
		mb(cs.Size()), mb(rs.Size()), 100*(float64(cs.Size())/float64(rs.Size())-1))
	os.Remove(refOut)
	os.RemoveAll(out)
	b.add(&row{op: fmt.Sprintf("backup's peak memory, %d files (#%d)", files, cv.num), derived: true,
		value: float64(cv.peak()) / 1024, result: mib(cv.peak() << 10), target: target{maxPeak, 64}})

	for _, n := range b.spec.manyFiles {
		many := b.path(fmt.Sprintf("gen-files-%d", n))
		err := b.cached(many, fmt.Sprintf("%d %d\n", n, b.seed), func(d string) error {
			b.say("cloning conversations into a store of %d files", n)
			return b.manyFiles(d, n)
		})
		if err != nil {
			return err
		}
		files, size, err := treeSize(many)
		if err != nil {
			return err
		}
		r := &row{op: fmt.Sprintf("convkit backup, %d files", files), files: files, bytes: size, target: target{maxPeak, 64}}
		if err := b.measure(r, "", nil, func() error { return os.RemoveAll(out) }, b.bin, "--data-dir", many, "backup", "--to", out); err != nil {
			return err
		}
		os.RemoveAll(out)
	}
	return nil
}

// restic runs scripts/restic-backup.sh (built convkit, a real restic) on a
// copy of the store into a new repository, and reports what each snapshot
// adds to it against the first: the store unchanged (target 1%), then
// after 1% of the conversations gained a turn, picked at random (no
// target: each lands in a restic chunk of its own, at least 512 KiB),
// and after the same ones gained another (target 5%: the conversations
// active in one hour are mostly those active in the hour before). An
// incremental reindex follows each round of turns, as the runtime keeps
// its index. Without restic it says so and adds no rows.
func (b *bench) restic(dir string) error {
	if _, err := exec.LookPath("restic"); err != nil {
		b.say("restic is not installed: no restic rows")
		return nil
	}
	data, repo := b.path("restic-store"), b.path("restic-repo")
	if err := b.copyTree(dir, data); err != nil {
		return err
	}
	defer os.RemoveAll(repo)
	defer b.setAside(data)
	script, err := filepath.Abs(filepath.Join("scripts", "restic-backup.sh"))
	if err != nil {
		return err
	}
	env := map[string]string{"CONVKIT_DATA_DIR": data, "RESTIC_REPOSITORY": repo, "RESTIC_PASSWORD": "convkit-bench",
		"RESTIC_CACHE_DIR": b.path("restic-cache"), "KEEP_LAST": "100", "CONVKIT": b.bin}
	for k, v := range env {
		os.Setenv(k, v)
		defer os.Unsetenv(k)
	}
	if err := b.cmd("restic", "init", "--quiet"); err != nil {
		return err
	}
	files, size, err := treeSize(data)
	if err != nil {
		return err
	}
	repoBytes := func() int64 {
		_, n, _ := treeSize(repo)
		return n
	}
	snapshot := func(what string) (int64, error) {
		before := repoBytes()
		r := b.add(&row{op: "scripts/restic-backup.sh, " + what, files: files, bytes: size})
		if err := b.once(r, "", []int{0}, nil, "bash", script); err != nil {
			return 0, err
		}
		return repoBytes() - before, nil
	}
	first, err := snapshot("first snapshot")
	if err != nil {
		return err
	}
	base := b.add(&row{op: "restic: what the first snapshot added to the repository", derived: true, result: mb(first)})
	percent := func(op string, n int64, t target) {
		v := 100 * float64(n) / float64(first)
		b.add(&row{op: op, derived: true, value: v, target: t, result: fmt.Sprintf("%s, %.2f%% of #%d", mb(n), v, base.num)})
	}
	n, err := snapshot("the store unchanged")
	if err != nil {
		return err
	}
	percent("restic: what the unchanged store's snapshot added", n, target{maxPercent, 1})

	tree, err := walk(data)
	if err != nil {
		return err
	}
	k := max(1, len(tree.Conversations)/100)
	rng := rand.New(rand.NewPCG(uint64(b.seed), 35))
	var active []string
	for round, what := range []string{"picked at random", "the same again"} {
		s, err := store.Open(context.Background(), data, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
		if err != nil {
			return err
		}
		if active == nil {
			for _, i := range rng.Perm(len(tree.Conversations)) {
				if id := tree.Conversations[i].ID; len(active) < k && fixtures.AppendTurn(s, id, 100+round) == nil {
					active = append(active, id)
				}
			}
		} else {
			for _, id := range active {
				if err := fixtures.AppendTurn(s, id, 100+round); err != nil {
					s.Close()
					return err
				}
			}
		}
		s.Close()
		if err := b.cmd(b.bin, "-q", "--data-dir", data, "reindex", "--incremental"); err != nil {
			return err
		}
		n, err := snapshot(fmt.Sprintf("1%% (%d) gained a turn, %s", len(active), what))
		if err != nil {
			return err
		}
		t := target{maxPercent, 5}
		if round == 0 {
			t = target{}
		}
		percent(fmt.Sprintf("restic: what 1%% gaining a turn (%s) added", what), n, t)
		if round == 1 {
			b.rows[len(b.rows)-1].note = "restic cuts chunks of 512 KiB to 8 MiB (1 MiB on average): a change costs about one where it lands, " +
				"more than 5% of a first snapshot under about 30 MB"
		}
	}
	return nil
}

// manyFiles makes a store of about n files in dir: a generated store of
// small conversations, cloned under new ids (each clone's conversation
// log gets a header naming its id; every other byte is the original's).
func (b *bench) manyFiles(dir string, n int) error {
	base := b.path("gen-clone-base")
	if err := b.cached(base, fmt.Sprintf("%d\n", b.seed), func(d string) error {
		_, err := fixtures.Generate(d, fixtures.Options{Seed: b.seed, Conversations: 2000, OrdinaryOnly: true, Compression: convlog.Zstd})
		return err
	}); err != nil {
		return err
	}
	tree, err := walk(base)
	if err != nil {
		return err
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	if err != nil {
		return err
	}
	files := 0
	for round := 0; files < n; round++ {
		for _, c := range tree.Conversations {
			if files >= n {
				break
			}
			id := fmt.Sprintf("%s-%d", c.ID, round)
			name, err := store.EncodeSegment(id)
			if err != nil {
				return err
			}
			to := filepath.Join(dir, store.ConversationsDirName, name)
			if err := os.MkdirAll(to, 0o700); err != nil {
				return err
			}
			ents, err := os.ReadDir(c.Path)
			if err != nil {
				return err
			}
			for _, e := range ents {
				data, err := os.ReadFile(filepath.Join(c.Path, e.Name()))
				if err != nil {
					return err
				}
				if strings.HasPrefix(e.Name(), store.ConversationLogBase+".") {
					if data, err = withHeaderID(data, c.ID, id, enc); err != nil {
						return fmt.Errorf("%s: %w", filepath.Join(c.Path, e.Name()), err)
					}
				}
				if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o600); err != nil {
					return err
				}
				files++
			}
		}
	}
	return nil
}

// withHeaderID replaces the id in the header of a compressed conversation
// log: its first frame holds exactly the header line.
func withHeaderID(data []byte, from, to string, enc *zstd.Encoder) ([]byte, error) {
	dec, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	br := bufio.NewReader(dec)
	header, err := br.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	var frame int64
	for f, err := range convlog.NewFrameScanner(convlog.Bytes(data), int64(len(data))).Frames() {
		if err != nil {
			return nil, err
		}
		frame = f.Size
		break
	}
	old := []byte(fmt.Sprintf(`"id":%q`, from))
	if !bytes.Contains(header, old) {
		return nil, errors.New("the header does not name the conversation")
	}
	header = bytes.Replace(header, old, []byte(fmt.Sprintf(`"id":%q`, to)), 1)
	return append(enc.EncodeAll(header, nil), data[frame:]...), nil
}

// transfer times exporting every conversation and importing the archive
// into an empty store, beside tar and zstd on the same directories.
func (b *bench) transfer(dir string) error {
	tree, err := walk(dir)
	if err != nil {
		return err
	}
	archive := b.path("export.tar.zst")
	args := []string{b.bin, "--data-dir", dir, "export", "--to", archive}
	for _, c := range tree.Conversations {
		args = append(args, c.ID)
	}
	files, size, err := treeSize(filepath.Join(dir, "conversations"))
	if err != nil {
		return err
	}
	b.say("export and import: %d conversations", len(tree.Conversations))
	refOut := b.path("ref.tar.zst")
	ref := &row{op: "tar -cf - conversations | zstd -3 -T0", files: files, bytes: size}
	cv := &row{op: fmt.Sprintf("convkit export, %d conversations", len(tree.Conversations)), files: files, bytes: size,
		ref: ref, target: target{minSpeed, 0.5}}
	err = b.pair(ref, cv, nil, func() error { return os.RemoveAll(archive) },
		[]string{"sh", "-c", `tar -cf - -C "$1" conversations | zstd -3 -T0 -qf -o "$2"`, "sh", dir, refOut}, args)
	if err != nil {
		return err
	}
	// The importing machine knows the generated agents and models; the
	// working directories do not exist here, which import reports (exit 3).
	untar, into := b.path("untar"), b.path("imported")
	cfg := "[agents.coder]\n[agents.explorer]\n[agents.reviewer]\n[models.deepseek-flash]\n[models.deepseek-pro]\n"
	ref = &row{op: "zstd -dc | tar -xf -, then convkit reindex", files: files, bytes: size}
	cv = &row{op: "convkit import into an empty store", files: files, bytes: size, ref: ref, target: target{minSpeed, 1.3}}
	cv.note = "the reference is a move by hand: the conversation directories extracted, then the index rebuilt; import warns that the generated working directories do not exist here (exit 3) and imports everything"
	err = b.rounds(
		step{r: ref, ok: []int{0, 3}, prep: func() error { return errors.Join(b.setAside(untar), os.Mkdir(untar, 0o700)) },
			args: []string{"sh", "-c", `zstd -dcq "$1" | tar -xf - -C "$2" && exec "$3" --data-dir "$2" -q reindex`, "sh", refOut, untar, b.bin}},
		step{r: cv, ok: []int{0, 3}, prep: func() error {
			return errors.Join(b.setAside(into), os.Mkdir(into, 0o700),
				os.WriteFile(filepath.Join(into, "config.toml"), []byte(cfg), 0o600))
		}, args: []string{b.bin, "--data-dir", into, "import", archive}})
	if err != nil {
		return err
	}
	return errors.Join(os.Remove(refOut), os.Remove(archive), b.setAside(untar), b.setAside(into))
}

// add numbers a row and appends it to the table.
func (b *bench) add(r *row) *row {
	r.num = len(b.rows) + 1
	b.rows = append(b.rows, r)
	return r
}

// step is one process of a round: its row, what to do before it
// (untimed; nil: nothing), the exit codes that pass (nil: 0), its stdin
// and its command line.
type step struct {
	r     *row
	prep  func() error
	ok    []int
	stdin string
	args  []string
	// missingIf: an older build that fails saying this lacks the job.
	missingIf string
}

// rounds runs the steps one after the other, round after round: a
// reference and the convkit runs compared with it alternate, so each
// round's ratios come from the same moment. Rounds repeat up to the
// size's runs while they take less than its budget in all.
func (b *bench) rounds(steps ...step) error {
	for _, s := range steps {
		b.add(s.r)
	}
	start := time.Now()
	for round := 0; round < b.spec.runs; round++ {
		if round > 0 && time.Since(start).Seconds()*float64(round+1)/float64(round) > b.spec.budget {
			break
		}
		for _, s := range steps {
			if s.r.missing != "" {
				continue
			}
			ok := s.ok
			if ok == nil {
				ok = []int{0}
			}
			if err := b.onceOr(s.r, s.stdin, ok, s.missingIf, s.prep, s.args[0], s.args[1:]...); err != nil {
				return err
			}
		}
	}
	return nil
}

// pair is rounds of a reference and one convkit run.
func (b *bench) pair(ref, cv *row, refPrep, cvPrep func() error, refArgs, cvArgs []string) error {
	return b.rounds(step{r: ref, prep: refPrep, args: refArgs}, step{r: cv, prep: cvPrep, args: cvArgs})
}

// measure is rounds of one run.
func (b *bench) measure(r *row, stdin string, ok []int, prep func() error, args ...string) error {
	return b.rounds(step{r: r, prep: prep, ok: ok, stdin: stdin, args: args})
}

// once runs prep, then one process to completion with stdin, and records
// its wall time and peak resident set; an exit code outside ok fails the
// bench, but for exit 2 of convkit (a usage error: a build without the
// job), which marks the row missing.
func (b *bench) once(r *row, stdin string, ok []int, prep func() error, name string, args ...string) error {
	return b.onceOr(r, stdin, ok, "", prep, name, args...)
}

func (b *bench) onceOr(r *row, stdin string, ok []int, missingIf string, prep func() error, name string, args ...string) error {
	if prep != nil {
		if err := prep(); err != nil {
			return fmt.Errorf("%s: preparing: %w", r.op, err)
		}
	}
	// GNU time reports the peak of the process tree it forks. Go starts
	// children by vfork, so a direct child's getrusage would count this
	// program's own memory as the child's.
	peakFile := b.path("peak")
	cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%M", "-o", peakFile, name}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+b.tmp)
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), io.Discard, &stderr
	start := time.Now()
	err := cmd.Run()
	secs := time.Since(start).Seconds()
	// The rusage wait4 returns for /usr/bin/time counts the processes it
	// and they waited for: every process of a pipeline, and time's own
	// (about a millisecond).
	var cpu float64
	if cmd.ProcessState != nil {
		cpu = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		return fmt.Errorf("%s: %w", r.op, err)
	}
	if name == b.bin && (code == 2 || code != 0 && missingIf != "" && strings.Contains(stderr.String(), missingIf)) {
		r.missing = "not in this build: " + firstLine(stderr.String())
		b.say("  #%d %s: %s", r.num, r.op, r.missing)
		return nil
	}
	if !slices.Contains(ok, code) {
		return fmt.Errorf("%s: %s exited %d:\n%s", r.op, strings.Join(cmd.Args, " "), code, tail(stderr.String(), 2000))
	}
	out, err := os.ReadFile(peakFile)
	if err != nil {
		return fmt.Errorf("%s: reading the peak memory: %w", r.op, err)
	}
	var peak int64 // KiB
	if _, err := fmt.Sscan(lastLine(string(out)), &peak); err != nil {
		return fmt.Errorf("%s: /usr/bin/time wrote %q: %w", r.op, out, err)
	}
	r.secs, r.cpus, r.peaks = append(r.secs, secs), append(r.cpus, cpu), append(r.peaks, peak)
	b.say("  #%d %-60s %7.2fs %7.2f CPU s %10s peak (load %s)", r.num, r.op, secs, cpu, mib(peak<<10), loadAvg())
	os.RemoveAll(b.tmp)
	return os.Mkdir(b.tmp, 0o700)
}

// print writes the table: one row per measurement; a convkit run shows
// its speed relative to the reference run it names (reference seconds /
// convkit seconds: above 1, convkit is faster), with the range of the
// per-round ratios.
func (b *bench) print(w io.Writer) {
	host, _ := os.Hostname()
	fmt.Fprintf(w, "convkit bench -size %s: %s/%s, %d CPUs, host %s, %s, %s\n", b.size, runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), host, runtime.Version(), time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "load average before: %s; after: %s\n\n", b.load[0], b.load[1])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\toperation\tfiles\tMB\truns\tseconds\tCPU s\tMB/s\tfiles/s\tpeak MiB\tresult\tratio range\tCPU ratio\ttarget\tmet")
	for _, r := range b.rows {
		switch {
		case r.derived:
			fmt.Fprintf(tw, "%d\t%s\t\t\t\t\t\t\t\t\t%s\t\t\t%s\t%s\n", r.num, r.op, r.result, r.target, r.met())
			continue
		case r.missing != "":
			fmt.Fprintf(tw, "%d\t%s\t%d\t%.1f\t\t\t\t\t\t\t%s\t\t\t%s\t\n", r.num, r.op, r.files, float64(r.bytes)/1e6, "n/a", r.target)
			continue
		}
		result, spread, cpuRatio := "", "", ""
		if r.ref != nil && r.ref.missing == "" && len(r.ref.secs) > 0 {
			result = fmt.Sprintf("%.2f× #%d", r.speed(), r.ref.num)
			cpuRatio = fmt.Sprintf("%.2f×", r.cpuSpeed())
			if lo, hi := r.spread(); len(r.secs) > 1 {
				spread = fmt.Sprintf("%.2f–%.2f", lo, hi)
			}
		} else if r.target.kind == maxSecs {
			result = secs(r.med())
		} else if r.target.kind == maxPeak {
			result = mib(r.peak() << 10)
		}
		secs := r.med()
		perSec := float64(r.files) / secs
		rate := fmt.Sprintf("%.0f", perSec)
		if perSec < 10 {
			rate = fmt.Sprintf("%.2f", perSec)
		}
		mbs := fmt.Sprintf("%.1f", float64(r.bytes)/1e6/secs)
		if r.bytes == 0 {
			mbs = ""
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.1f\t%d\t%.2f\t%.2f\t%s\t%s\t%.1f\t%s\t%s\t%s\t%s\t%s\n", r.num, r.op, r.files,
			float64(r.bytes)/1e6, len(r.secs), secs, r.cpu(), mbs, rate, float64(r.peak())/1024, result, spread, cpuRatio,
			r.target, r.met())
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, r := range b.rows {
		if r.note != "" {
			fmt.Fprintf(w, "#%d: %s\n", r.num, r.note)
		}
		if r.missing != "" {
			fmt.Fprintf(w, "#%d: %s\n", r.num, r.missing)
		}
	}
	fmt.Fprintln(w, "seconds: the median of the runs (wall); ratio range: the reference's time over convkit's, lowest and highest round.")
	fmt.Fprintln(w, "CPU s: the median of the runs' user + system seconds, every process of a pipeline counted; CPU ratio: the reference's")
	fmt.Fprintln(w, "median CPU seconds over convkit's (above 1, convkit does less work). Speed targets are wall ratios; \"≤ 1.5× CPU\" is")
	fmt.Fprintln(w, "convkit's median CPU seconds over the reference's.")
	fmt.Fprintln(w, "MB: plain log bytes for migrate, inspect and reindex; bytes on disk for backup, export and import.")
	fmt.Fprintln(w, "peak: the largest of the runs. Memory budgets: migrate ≤ 64 MiB + 32 MiB per job; inspect ≤ 64 MiB and reindex flat, whatever the log's and the store's size.")
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
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

// zstdOut runs zstd -dc on path and hands its output to use.
func zstdOut(path string, use func(io.Reader) error) error {
	cmd := exec.Command("zstd", "-dcq", path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	err = use(out)
	io.Copy(io.Discard, out)
	if werr := cmd.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("zstd -dc %s: %w", path, err)
	}
	return nil
}

func plainSize(path string, compressed bool) (int64, error) {
	if !compressed {
		fi, err := os.Stat(path)
		if err != nil {
			return 0, err
		}
		return fi.Size(), nil
	}
	var n int64
	err := zstdOut(path, func(r io.Reader) (err error) {
		n, err = io.Copy(io.Discard, r)
		return err
	})
	return n, err
}

func lineCount(path string) (int, error) {
	n := 0
	err := zstdOut(path, func(r io.Reader) error {
		buf := make([]byte, 1<<20)
		for {
			k, err := r.Read(buf)
			n += bytes.Count(buf[:k], []byte{'\n'})
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	})
	return n, err
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

// setAside renames p, if it exists, into the bench's trash, which is
// removed when the run ends. A tree is not removed between rounds: on
// ext4 without a journal, an inode freed in the last 30 seconds is
// skipped, one by one, when a new one is allocated, and the runs after a
// removal of tens of thousands of files spent most of their time there
// (an import's system time grew from 4 to 24 s over three rounds, tar's
// from 2.5 to 5.5 s). The trash takes the disk space of every round.
func (b *bench) setAside(p string) error {
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := os.MkdirAll(b.trash, 0o700); err != nil {
		return err
	}
	b.set++
	return os.Rename(p, filepath.Join(b.trash, fmt.Sprint(b.set)))
}

// copyTree copies from to the new path to, setting aside what a previous run
// left there (cp -a into an existing directory would nest the copy), and
// writes the copy to disk: a measured run that fsyncs would otherwise pay
// for the write-back of the bench's own copy.
func (b *bench) copyTree(from, to string) error {
	if err := b.setAside(to); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		return fmt.Errorf("cp -a %s %s: %v: %s", from, to, err, out)
	}
	if out, err := exec.Command("sync", "-f", to).CombinedOutput(); err != nil {
		return fmt.Errorf("sync -f %s: %v: %s", to, err, out)
	}
	return nil
}

// lastLine is the last non-empty line of s (GNU time puts a "Command
// exited with non-zero status" line before the figure).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
func kb(n int64) string { return fmt.Sprintf("%.1f KB", float64(n)/1e3) }
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
	defer s.Close()
	return s.Walk()
}
