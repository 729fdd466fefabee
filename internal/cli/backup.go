package cli

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/backup"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

func newBackupCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:      "backup",
		Usage:     "write one archive of the store: every log, a metadata.db snapshot, a manifest",
		ArgsUsage: " ",
		Description: `Writes one archive (tar inside zstd) of the data directory: every log of
every conversation, a consistent snapshot of metadata.db (SQLite VACUUM
INTO) and, last, MANIFEST.json: the tool and format versions and every file
with its size and SHA-256, and for logs the committed length (and with
--strict the event count). --to DIR publishes convkit-<UTC time>.tar.zst in DIR (created 0700),
written under a temporary name and renamed only when complete; --to -
streams the archive to stdout (for restic backup --stdin or rclone rcat),
and the summary then goes to stderr.

When runtime.lock is free the backup holds it for the run and copies every
log whole. When the runtime holds it, the backup does not wait: it copies
each log's committed prefix (up to its last complete line or frame) while
the runtime keeps appending, and the manifest records that it was online
and who held the lock. Symbolic links are never followed. The committed
prefix comes from each log's structure (lines, zstd frames); --strict also
reads every event as reindex does, which finds invalid logs at backup time
but costs a full parse. A file that cannot be read is left out and
reported, a log that fails its check is archived whole and reported:
either gives exit 3.

Retention then deletes convkit's own archives in DIR that no policy keeps,
as restic forget names them: --keep N (the newest N), --keep-within AGE
(taken within AGE of the newest), --keep-daily, --keep-weekly and
--keep-monthly N (the newest of each of the last N UTC days, ISO weeks,
months that have one). The new archive and the newest verified one are
always kept. --dry-run writes and deletes nothing and says what would be
written and deleted. 'convkit backup verify ARCHIVE' checks an archive; 'convkit restore'
puts one back. See docs/BACKUP.md.`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "to", Usage: "write the archive into `DIR`, or to stdout with -"},
			&ucli.IntFlag{Name: "keep", Usage: "then keep the newest `N` archives in DIR (the new one included)"},
			&ucli.StringFlag{Name: "keep-within", Usage: "then keep the archives taken within `AGE` of the newest (1y6m, 7d, 26h)"},
			&ucli.IntFlag{Name: "keep-daily", Usage: "then keep the newest archive of each of the last `N` days that have one"},
			&ucli.IntFlag{Name: "keep-weekly", Usage: "then keep the newest archive of each of the last `N` weeks that have one"},
			&ucli.IntFlag{Name: "keep-monthly", Usage: "then keep the newest archive of each of the last `N` months that have one"},
			&ucli.BoolFlag{Name: "dry-run", Usage: "say what would be written and deleted; change nothing"},
			&ucli.BoolFlag{Name: "strict", Usage: "also read every event of every log, as reindex does (reports invalid logs; costs a full parse)"},
			&ucli.BoolFlag{Name: "no-index", Usage: "leave metadata.db out (restore rebuilds it from the logs)"},
			&ucli.StringFlag{Name: "metrics-file", Usage: "then write the run's metrics to `FILE` (Prometheus text format, for node_exporter's textfile collector), good or bad"},
			&ucli.BoolFlag{Name: "rsyncable", Usage: "lay the archive out for restic, borg or kopia to deduplicate: the same store gives the same bytes, a grown log the same bytes but its end"},
		},
		Action: withArgs(0, 0, func(c *ucli.Context) error {
			to := c.String("to")
			if to == "" {
				return usagef(c, "--to DIR (or --to - for stdout) is required")
			}
			for _, f := range []string{"keep", "keep-daily", "keep-weekly", "keep-monthly"} {
				if c.IsSet(f) && c.Int(f) < 1 {
					return usagef(c, "--%s must be a positive whole number", f)
				}
			}
			if _, err := spanFlag(c, "keep-within"); err != nil {
				return err
			}
			for _, f := range []string{"keep", "keep-within", "keep-daily", "keep-weekly", "keep-monthly"} {
				if to == "-" && c.IsSet(f) {
					return usagef(c, "--%s needs --to DIR: there is no directory to prune when streaming to stdout", f)
				}
			}
			if to == "-" && !c.Bool("dry-run") {
				if err := e.refuseTerminal(c, "backup --to - | restic backup --stdin --stdin-filename convkit.tar.zst", "backup --to DIR"); err != nil {
					return err
				}
			}
			start := time.Now()
			res, err := runBackup(c, e, to)
			end := time.Now()
			metrics := c.String("metrics-file")
			if metrics == "" || c.Bool("dry-run") {
				return err
			}
			code := exitCode(err)
			if code != exitOK && code != exitPartial {
				res = nil // no complete archive
			}
			if merr := backup.WriteMetrics(metrics, backup.MetricsRun{End: end, Duration: end.Sub(start), ExitCode: code, Result: res}); merr != nil {
				if err == nil {
					return fmt.Errorf("the backup is complete, but its metrics were not written: %w", merr)
				}
				fmt.Fprintf(e.stderr, "%s: warning: the metrics were not written: %s\n", progName, text(termtext.Text(merr)))
			}
			return err
		}),
		Subcommands: []*ucli.Command{newBackupVerifyCommand(e), newBackupListCommand(e), newBackupLatestCommand(e)},
	}
}

// spanFlag is the age the option name gives (zero when unset).
func spanFlag(c *ucli.Context, name string) (backup.Span, error) {
	if !c.IsSet(name) {
		return backup.Span{}, nil
	}
	span, err := backup.ParseSpan(c.String(name))
	if err == nil && span.IsZero() {
		err = fmt.Errorf("%q is no time at all", c.String(name))
	}
	if err != nil {
		return span, usagef(c, "--%s: %v", name, err)
	}
	return span, nil
}

// backupSummary is the --json output of backup (docs/BACKUP.md).
type backupSummary struct {
	SchemaVersion int               `json:"schemaVersion"`
	Archive       string            `json:"archive"`
	DryRun        bool              `json:"dryRun"`
	CreatedAt     time.Time         `json:"createdAt,omitzero"`
	Online        bool              `json:"online"`
	Holder        *store.Holder     `json:"holder"`
	LockError     string            `json:"lockError,omitempty"`
	Index         string            `json:"index"`
	Files         int               `json:"files"`
	Logs          int               `json:"logs"`
	Conversations int               `json:"conversations"`
	Bytes         int64             `json:"bytes"`
	ArchiveBytes  int64             `json:"archiveBytes"`
	LiveTailBytes int64             `json:"liveTailBytes"`
	LogCheck      string            `json:"logCheck,omitempty"`
	InvalidLogs   int               `json:"invalidLogs"`
	Problems      []store.Item      `json:"problems"`
	Invalid       []store.Item      `json:"invalid"`
	Vanished      []string          `json:"vanished"`
	Deleted       []string          `json:"deleted"`
	RemovedTemps  []string          `json:"removedTemps"`
	Planned       []backup.PlanFile `json:"planned,omitempty"`
}

// backupMemory is the resident set a backup stays within, whatever the size.
const backupMemory = 64 << 20

// runBackup runs the backup and returns what it wrote (nil when nothing).
func runBackup(c *ucli.Context, e *env, to string) (res *backup.Result, err error) {
	defer softMemoryLimit(backupMemory)()
	mode := store.LockIfFree
	if c.Bool("dry-run") {
		mode = store.LockNone
	}
	s, err := e.openStore(c, "", mode, store.CreateNever)
	if err != nil {
		return res, err
	}
	defer s.Close()
	stream := to == "-" && !c.Bool("dry-run")
	bar := e.newProgress("backup", "files archived", 0)
	// Its events are all problems, which --quiet keeps.
	opts := backup.Options{ToolVersion: buildVersion(), Progress: bar, OnEvent: itemPrinter(e.libraryLines(e.stderr, nil), "archived"), Strict: c.Bool("strict"),
		Rsyncable: c.Bool("rsyncable"), NoIndex: c.Bool("no-index")}
	dr := &backup.DirResult{Archive: "-"}
	switch {
	case to == "-" && c.Bool("dry-run"):
		dr.Plan, err = backup.PlanBackup(s, opts.NoIndex)
	case stream:
		dr.Result, err = backup.Write(c.Context, s, e.stdout, opts)
	default:
		dir, aerr := filepath.Abs(to)
		if aerr != nil {
			return nil, aerr
		}
		within, _ := spanFlag(c, "keep-within") // checked above
		keep := backup.Retention{Last: c.Int("keep"), Within: within, Daily: c.Int("keep-daily"), Weekly: c.Int("keep-weekly"), Monthly: c.Int("keep-monthly")}
		dr, err = backup.ToDir(c.Context, s, dir, backup.DirOptions{Options: opts, Retention: keep, DryRun: c.Bool("dry-run")})
	}
	bar.Finish()
	// Only a retention that failed after the archive was published leaves
	// something to print.
	if dr == nil || (err != nil && dr.Result == nil) {
		return nil, err
	}
	if dr.InfoError != "" {
		fmt.Fprintf(e.stderr, "%s: warning: the archive is complete, but its sidecar could not be written (backup list will not show its details): %s\n", progName, text(dr.InfoError))
	}
	res = dr.Result
	sum := backupSummary{SchemaVersion: schemaVersion, Archive: dr.Archive, DryRun: dr.Plan != nil, Problems: []store.Item{}, Invalid: []store.Item{},
		Vanished: []string{}, Deleted: append([]string{}, dr.Deleted...), RemovedTemps: append([]string{}, dr.RemovedTemps...)}
	if p := dr.Plan; p != nil {
		sum.Online, sum.Holder, sum.Problems, sum.Planned, sum.Index = p.Online, p.Holder, p.Problems, p.Files, p.Index
		sum.Files, sum.Bytes, sum.Logs, sum.Conversations = len(p.Files), p.Bytes, p.Logs, p.Conversations
	}
	if res != nil {
		m := res.Manifest
		sum.CreatedAt, sum.Online, sum.Holder, sum.LockError, sum.Index = m.CreatedAt, m.Online, m.Holder, m.LockError, m.Index
		sum.Files, sum.Logs, sum.Conversations, sum.Bytes = m.Counts.Files, m.Counts.Logs, m.Counts.Conversations, m.Counts.Bytes
		sum.ArchiveBytes, sum.LiveTailBytes, sum.InvalidLogs, sum.LogCheck = res.Bytes, m.LiveTailBytes, m.Counts.InvalidLogs, m.LogCheck
		sum.Problems, sum.Invalid, sum.Vanished = m.Problems, append(sum.Invalid, res.Invalid...), append(sum.Vanished, res.Vanished...)
	}
	out := e.stdout
	if stream {
		out = e.stderr // stdout carries the archive
	}
	// Streaming, --quiet drops the text summary (on stderr); --json's is
	// the result.
	if !(stream && e.g.Quiet && !e.g.JSON) {
		if perr := e.result(out, "", &sum, func() { printBackup(e, out, &sum) }); perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil {
		return res, err
	}
	if res != nil && res.Partial() {
		unreadable, invalid := len(res.Manifest.Problems), res.Manifest.Counts.InvalidLogs
		parts := labels(label{unreadable > 0, fmt.Sprintf("left out %d file(s) it could not read (UNREADABLE lines)", unreadable)},
			label{invalid > 0, fmt.Sprintf("archived %d invalid log(s) whole (INVALID lines)", invalid)})
		return res, partialf("the backup %s", strings.Join(parts, " and "))
	}
	if sum.DryRun && len(sum.Problems) > 0 {
		return res, partialf("a backup would leave out %d file(s)", len(sum.Problems))
	}
	return res, nil
}

func printBackup(e *env, out io.Writer, s *backupSummary) {
	if s.DryRun {
		for _, f := range s.Planned {
			fmt.Fprintf(out, "WOULD ARCHIVE %s (%d bytes)\n", text(f.Name), f.Size)
		}
		for _, p := range s.Problems {
			fmt.Fprintf(out, "WOULD LEAVE OUT %s: %s\n", text(p.Path), text(p.Reason))
		}
		for _, d := range s.Deleted {
			fmt.Fprintf(out, "WOULD DELETE %s\n", text(d))
		}
		fmt.Fprintf(out, "Dry run: archive=%s, files=%d, bytes=%d, online=%v, would-delete=%d\n",
			text(s.Archive), s.Files, s.Bytes, s.Online, len(s.Deleted))
		return
	}
	if !e.g.Quiet {
		for _, d := range s.Deleted {
			fmt.Fprintf(out, "DELETED %s\n", text(d))
		}
	}
	// Without --strict none found invalid is not none invalid.
	invalid := strconv.Itoa(s.InvalidLogs)
	if s.LogCheck == backup.LogCheckStructure && s.InvalidLogs == 0 {
		invalid = "not-checked"
	}
	fmt.Fprintf(out, "Archive: %s\n", text(s.Archive))
	fmt.Fprintf(out, "Summary: files=%d, logs=%d, conversations=%d, bytes=%d, archive-bytes=%d, unreadable=%d, invalid=%s, deleted=%d, online=%s\n",
		s.Files, s.Logs, s.Conversations, s.Bytes, s.ArchiveBytes, len(s.Problems), invalid, len(s.Deleted), onlineText(s.Online, s.Holder))
}

// onlineText is a summary's online=: whether, and by whom, the lock was held.
func onlineText(online bool, h *store.Holder) string {
	switch {
	case online && h != nil:
		return fmt.Sprintf("true (runtime.lock held by pid %d)", h.PID)
	case online:
		return "true"
	}
	return "false"
}

func newBackupVerifyCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:      "verify",
		Usage:     "check an archive as a restore would, without restoring it",
		ArgsUsage: "ARCHIVE",
		Description: `The restore drill. Extracts ARCHIVE (a path, DIR/latest for the newest
archive in a backup directory, or - for stdin) into a temporary directory
(under --work-dir, default $TMPDIR) with every safety check restore makes,
compares every file's size and SHA-256 with the manifest, reads every log
as strictly as the backup did, checks the metadata.db snapshot with
SQLite's quick_check, rebuilds an index from the logs and compares it with
the manifest; then removes the directory. Takes no lock. Exit 1 on any
mismatch, or when the archive is damaged, truncated or refused; exit 3
when it holds logs that do not read (INVALID lines: archived as they were
in the store), as restore exits on it.

For an archive in a backup directory (convkit-<UTC time>.tar.zst), the
result is recorded in its sidecar (ARCHIVE.json), which 'backup list'
shows.`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "work-dir", Usage: "extract into a temporary directory under `DIR`"},
		},
		Action: archiveAction(e, nil, runBackupVerify),
	}
}

// archiveAction is the Action of a command of one ARCHIVE, check (if any) first.
func archiveAction(e *env, check ucli.ActionFunc, run func(*ucli.Context, *env, string) error) ucli.ActionFunc {
	return func(c *ucli.Context) error {
		if n := c.NArg(); n != 1 {
			return usagef(c, "want exactly one ARCHIVE (a path, DIR/latest, or - for stdin), got %d arguments", n)
		}
		if check != nil {
			if err := check(c); err != nil {
				return err
			}
		}
		name, err := backup.ResolveArchive(c.Args().First())
		if err != nil {
			return err
		}
		return run(c, e, name)
	}
}

func runBackupVerify(c *ucli.Context, e *env, name string) error {
	bar := e.newProgress("verify", unitBytes, 0) // VerifyArchive sets a file's size as the total
	res, _, recErr, err := backup.VerifyArchive(c.Context, name, backup.VerifyOptions{Archive: name, WorkDir: c.String("work-dir"),
		Progress: bar, Stdin: e.stdin, ToolVersion: buildVersion()})
	bar.Finish()
	if recErr != nil {
		fmt.Fprintf(e.stderr, "%s: warning: the verification was not recorded (backup list will not show it): %s\n", progName, text(recErr.Error()))
	}
	if err != nil {
		return err
	}
	if err := printVerify(e, res); err != nil {
		return err
	}
	if !res.OK {
		return fmt.Errorf("%s does not match its manifest (%d mismatch(es))", name, len(res.Mismatches))
	}
	if res.InvalidLogs == 0 {
		return nil
	}
	first := ""
	if len(res.Invalid) > 0 {
		first = "; the first: " + withPath(res.Invalid[0].Path, res.Invalid[0].Reason)
	}
	return partialf("%s holds %d log(s) that do not read (INVALID lines), archived as they were in the store%s", name, res.InvalidLogs, first)
}

func printVerify(e *env, res *backup.VerifyResult) error {
	return e.result(e.stdout, "", res, func() {
		printMismatches(e, "INVALID", res.Invalid)
		printMismatches(e, "MISMATCH", res.Mismatches)
		fmt.Fprintf(e.stdout, "Verify: files=%d, logs=%d, bytes=%d, invalid=%d, index=%s, rebuilt: indexed=%d, skipped=%d, deletions-finished=%d, sessions=%d, mismatches=%d\n",
			res.Files, res.Logs, res.Bytes, res.InvalidLogs, text(res.Index), res.Rebuilt.Indexed, res.Rebuilt.Skipped,
			res.Rebuilt.DeletionsFinished, res.Rebuilt.Sessions, len(res.Mismatches))
	})
}

func printMismatches(e *env, word string, list []store.Item) {
	for _, m := range list {
		fmt.Fprintf(e.stdout, "%s %s\n", word, text(withPath(m.Path, m.Reason)))
	}
}

func newBackupListCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:      "list",
		Usage:     "list the archives in a backup directory: time, size, conversations, online, verified",
		ArgsUsage: "DIR",
		Description: `Lists convkit's archives in DIR (convkit-<UTC time>[-N].tar.zst, as backup
--to DIR writes them), oldest first, newest ("latest") last: when each was
taken, its size, how many conversations it holds, whether it was taken
online (while the runtime held runtime.lock), and whether it was verified:
"ok" or "FAILED" with the time of the last 'backup verify' of this very
file, "stale" when the file changed since, "no" when it never was. The
details come from each archive's sidecar (ARCHIVE.json, written by backup
and by backup verify); an archive without one shows "-". It reads no
archive and takes no lock. --json prints one object (docs/BACKUP.md).`,
		Action: withArgs(1, 1, func(c *ucli.Context) error {
			dir := c.Args().First()
			list, err := backup.ListArchives(dir)
			if err != nil {
				return err
			}
			out := archiveListing{SchemaVersion: schemaVersion, Dir: dir, Archives: []archiveRecord{}}
			for _, a := range list {
				out.Archives = append(out.Archives, recordOf(a))
				if a.InfoError != "" {
					fmt.Fprintf(e.stderr, "%s: warning: %s\n", progName, text(a.InfoError))
				}
			}
			return e.result(e.stdout, "", out, func() {
				t := termtext.NewTable(e.stdout, "ARCHIVE", "TIME", "SIZE", "CONVERSATIONS", "ONLINE", "VERIFIED")
				for _, r := range out.Archives {
					convs, online := "-", "-"
					if r.Conversations != nil {
						convs, online = strconv.Itoa(*r.Conversations), map[bool]string{false: "no", true: "yes"}[*r.Online]
					}
					verified := r.Verified
					if r.Verified != backup.VerifiedOK && r.Verified != backup.VerifiedStale && r.Verified != backup.VerifiedNever {
						verified = strings.ToUpper(verified) // failed, invalid: someone should look
					}
					if v := r.Verification; v != nil && r.Verified != backup.VerifiedStale && r.Verified != backup.VerifiedNever {
						verified += " " + v.At.UTC().Format("2006-01-02 15:04")
					}
					t.Row(text(r.Name), r.Time.UTC().Format("2006-01-02 15:04:05Z"), termtext.Size(r.Size), convs, online, verified)
				}
				t.Flush()
			})
		}),
	}
}

func newBackupLatestCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:      "latest",
		Usage:     "print the newest archive in a backup directory; exit 1 when there is none, or it is too old or not verified",
		ArgsUsage: "DIR",
		Description: `Prints the path of the newest of convkit's archives in DIR (by the time in
its name; --json: its record, as backup list prints it) and exits 0. Exit 1
when DIR holds none, when the newest is older than --max-age (or dated
ahead of the clock), or, with --verified, when its last verification did
not match with every log read
(never verified, failed, changed since, or holding logs that do not read):
an alert in one line of cron, such as

  convkit -q backup latest /var/backups/convkit --max-age 26h --verified

--max-age takes years, months, days and hours as restic writes them: 1y6m,
7d, 26h. It reads no archive and takes no lock.`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "max-age", Usage: "exit 1 when the newest archive is older than `AGE` (1y6m, 7d, 26h)"},
			&ucli.BoolFlag{Name: "verified", Usage: "exit 1 unless the newest archive's last verification matched"},
		},
		Action: withArgs(1, 1, func(c *ucli.Context) error {
			span, err := spanFlag(c, "max-age")
			if err != nil {
				return err
			}
			opts := backup.LatestOptions{MaxAge: span, Verified: c.Bool("verified")}
			dir := c.Args().First()
			a, err := backup.Latest(dir, opts)
			if a != nil {
				if jerr := e.result(e.stdout, versionHead, recordOf(*a), func() { fmt.Fprintln(e.stdout, text(a.Path)) }); jerr != nil {
					return jerr
				}
			}
			return err
		}),
	}
}

// archiveListing is the --json output of backup list (docs/BACKUP.md).
type archiveListing struct {
	SchemaVersion int             `json:"schemaVersion"`
	Dir           string          `json:"dir"`
	Archives      []archiveRecord `json:"archives"`
}

// archiveRecord is an archive with its sidecar's details (null without one).
type archiveRecord struct {
	backup.ArchiveInfo
	Conversations *int                 `json:"conversations"`
	Online        *bool                `json:"online"`
	Verified      string               `json:"verified"` // ok, failed, stale, no
	Verification  *backup.Verification `json:"verification"`
	InfoError     string               `json:"infoError,omitempty"`
}

// recordOf is an archive as backup list and backup latest print it.
func recordOf(a backup.ArchiveInfo) archiveRecord {
	r := archiveRecord{ArchiveInfo: a, Verified: a.Verification(), InfoError: a.InfoError}
	if a.Info != nil {
		n, online := a.Info.Conversations, a.Info.Online
		r.Conversations, r.Online, r.Verification = &n, &online, a.Info.Verified
	}
	return r
}

func newRestoreCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:      "restore",
		Usage:     "verify an archive, then restore the store (or one conversation) from it",
		ArgsUsage: "ARCHIVE --to DIR",
		Description: `Verifies ARCHIVE (a path, or - for stdin) as 'backup verify' does, in a
private staging directory beside DIR, and restores only when everything
checked out: files 0600, directories 0700, each fsynced; entries with
absolute paths, "..", links, devices or names outside the store layout
are refused and nothing is written at DIR. The index is rebuilt in the
staging directory, which is then renamed to DIR.

A non-empty DIR is refused unless --force: restore then takes its
runtime.lock (exit 11 while the runtime holds it) and moves the old store
aside to DIR.replaced-<UTC time>; it never deletes it.

--conversation ID restores that conversation and the conversations it
reads older history from (its fork ancestors) into the store at DIR (new
or existing; under its runtime.lock). Ancestors already there are kept as
they are; the conversation itself is refused if present unless --force,
which moves it aside to DIR/replaced/<its directory>-<UTC time>, as
import does. The store is then reindexed.`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "to", Usage: "restore into the data directory `DIR`"},
			&ucli.BoolFlag{Name: "force", Usage: "replace what is there, moving it aside (never deleting it)"},
			&ucli.StringFlag{Name: "conversation", Usage: "restore only conversation `ID` (or a unique prefix of at least 4 characters among the archive's) and its fork ancestors"},
		},
		Action: archiveAction(e, func(c *ucli.Context) error {
			if c.String("to") == "" {
				return usagef(c, "--to DIR is required")
			}
			if c.IsSet("conversation") && c.String("conversation") == "" {
				return usagef(c, "--conversation needs a conversation id")
			}
			return nil
		}, runRestore),
	}
}

// openRestoreTarget locks the store restore writes into with --force or
// --conversation; nil for a missing or empty target, which restore makes.
func (e *env) openRestoreTarget(c *ucli.Context, opts backup.RestoreOptions) (*store.Store, error) {
	target, err := filepath.Abs(opts.Target)
	if err != nil {
		return nil, err
	}
	free, err := backup.CheckTarget(target)
	if err != nil || free || (!opts.Force && opts.Conversation == "") {
		return nil, err // Restore refuses a target that is not free
	}
	s, err := e.openStore(c, target, store.LockExclusive, store.CreateNever)
	if errors.Is(err, store.ErrNoStore) {
		what := "; it is left alone"
		if opts.Conversation != "" {
			what = "; restore a single conversation into a store, or into a new directory"
		}
		return nil, fmt.Errorf("%s: the target does not look like a convkit data directory (no %s/, %s or %s)%s", target,
			store.ConversationsDirName, store.IndexFileName, store.LockFileName, what)
	}
	return s, err
}

func runRestore(c *ucli.Context, e *env, name string) error {
	r, bar, done, err := e.archiveInput(name, "restore")
	if err != nil {
		return err
	}
	defer done()
	opts := backup.RestoreOptions{Archive: name, Target: c.String("to"), Force: c.Bool("force"),
		Conversation: c.String("conversation")}
	if !e.g.JSON {
		opts.Log = e.libraryLines(e.stderr, problemLine)
		render := itemPrinter(opts.Log, "archived")
		opts.OnEvent = func(it store.Item) {
			// The rebuild's SKIPPED and WILL NOT OPEN lines are results,
			// printed on stdout below.
			if it.Kind != store.ItemSkipped && it.Kind != store.ItemWillNotOpen {
				render(it)
			}
		}
	}
	into, err := e.openRestoreTarget(c, opts)
	if err != nil {
		return err
	}
	if into != nil {
		defer into.Close()
	}
	res, err := backup.Restore(c.Context, r, into, opts)
	bar.Finish()
	var mm *backup.MismatchError
	if errors.As(err, &mm) {
		if perr := printVerify(e, mm.Result); perr != nil {
			return perr
		}
		return fmt.Errorf("%s does not match its manifest (%d mismatch(es)); nothing was restored", name, len(mm.Result.Mismatches))
	}
	switch {
	case errors.Is(err, backup.ErrTargetNotEmpty):
		return withHint(err, "restore into a new or empty directory, or add --force")
	case errors.Is(err, backup.ErrConversationExists):
		return withHint(err, "add --force to move the present one aside")
	case err != nil:
		return ambiguous(c, err, "conversation", "")
	}
	if err := e.result(e.stdout, "", res, func() { printRestore(e, name, res) }); err != nil {
		return err
	}
	// Exit 3 as reindex exits on skips, and verify on logs that do not read.
	if rr := res.Reindex; rr != nil && len(rr.Skipped) > 0 {
		return partialf("restored, but the rebuild of metadata.db skipped %d item(s); the first: %s", len(rr.Skipped), skipText(rr.Skipped))
	}
	if n := len(res.Invalid); n > 0 {
		return partialf("restored, but %d log(s) restored do not read (INVALID lines), as they were in the store; the first: %s",
			n, withPath(res.Invalid[0].Path, res.Invalid[0].Reason))
	}
	return nil
}

func printRestore(e *env, name string, res *backup.RestoreResult) {
	printMismatches(e, "INVALID", res.Invalid)
	fmt.Fprintf(e.stdout, "Restored: %s into %s (%d conversations)\n", text(name), text(res.Target), len(res.Conversations))
	if res.MovedAside != "" {
		fmt.Fprintf(e.stdout, "Moved aside: %s\n", text(res.MovedAside))
	}
	if !e.g.Quiet {
		for _, k := range res.Kept {
			fmt.Fprintf(e.stdout, "KEPT %s: already in the store\n", text(k))
		}
	}
	if rr := res.Reindex; rr != nil {
		e.printFindings(rr.Skipped, rr.WillNotOpen, !e.g.Quiet)
		fmt.Fprintf(e.stdout, "Summary: indexed=%d, skipped=%d, deletions-finished=%d, will-not-open=%d\n",
			rr.Indexed, len(rr.Skipped), len(rr.DeletionsFinished), len(rr.WillNotOpen))
	}
}
