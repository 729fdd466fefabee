package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/internal/transfer"
	"github.com/convkit/convkit/store"
)

func newExportCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:      "export",
		Usage:     "write conversations, with their fork ancestors, into one archive for another machine",
		ArgsUsage: "ID... --to FILE|-",
		Description: `Writes the conversations ID... into one archive (tar inside zstd) with, last,
MANIFEST.json: the format and tool versions and, for each conversation, its
id, title, working directory, agents and models and fork source, and every
file with its size, SHA-256 and committed length. A conversation forked
after a compaction reads older history from its source: export adds such
fork ancestors, transitively, and says which it added.

Export takes no lock and changes nothing: it copies the committed prefix of
each log's current generation (a torn tail, or what the runtime is
appending, is left out), so it runs while the runtime runs; the manifest
records whether runtime.lock was held. --to FILE writes a temporary file
beside FILE and publishes it only when complete, never over an existing
file; --to - streams the archive to stdout, and the summary then goes to
stderr.

A conversation with a log that cannot be read is left out and reported, as
is a missing fork ancestor: exit 3. A conversation that does not exist:
exit 1, nothing written. 'convkit import' reads the archive. See
docs/TRANSFER.md.

--dry-run reads and checks every log as the export would and says what it
would write: each conversation (the fork ancestors it adds, and for whom)
with its files and size; it writes nothing, and --to may be left out.`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "to", Usage: "write the archive to the new file `FILE`, or to stdout with -"},
			&ucli.BoolFlag{Name: "dry-run", Usage: "say what the archive would hold, fork ancestors included; write nothing"},
		},
		Action: withArgs(1, -1, func(c *ucli.Context) error {
			ids := c.Args().Slice()
			to := c.String("to")
			if to == "" && !c.Bool("dry-run") {
				return usagef(c, "--to FILE (or --to - for stdout) is required")
			}
			if to == "-" && !c.Bool("dry-run") {
				if err := e.refuseTerminal(c, "export ID --to - > FILE", "export ID --to FILE"); err != nil {
					return err
				}
			}
			for _, id := range ids {
				if _, err := store.EncodeSegment(id); err != nil {
					return usagef(c, "conversation id %s: %v", termtext.Quote(id), err)
				}
			}
			return runExport(c, e, ids, to)
		}),
	}
}

// exportSummary is the --json output of export (docs/JSON.md).
type exportSummary struct {
	SchemaVersion int                     `json:"schemaVersion"`
	DryRun        bool                    `json:"dryRun,omitempty"`
	Archive       string                  `json:"archive"`
	CreatedAt     time.Time               `json:"createdAt"`
	Online        bool                    `json:"online"`
	Holder        *store.Holder           `json:"holder"`
	Requested     []string                `json:"requested"`
	Added         []string                `json:"added"`
	Conversations []transfer.Conversation `json:"conversations"`
	Files         int                     `json:"files"`
	Bytes         int64                   `json:"bytes"`
	ArchiveBytes  int64                   `json:"archiveBytes"`
	LeftOutBytes  int64                   `json:"leftOutBytes"`
	Problems      []store.Item            `json:"problems"`
}

func runExport(c *ucli.Context, e *env, ids []string, to string) error {
	s, err := e.openStore(c, "", store.LockNone, store.CreateNever)
	if err != nil {
		return err
	}
	defer s.Close()
	if ids, err = resolveIDs(c, s, ids); err != nil {
		return err
	}
	out := e.stdout
	if to == "-" {
		out = e.stderr // stdout carries the archive
	}
	bar := e.newProgress("export", "conversations", 0)
	lines := e.libraryLines(e.stderr, problemLine)
	opts := transfer.ExportOptions{IDs: ids, ToolVersion: buildVersion(), Progress: bar, OnEvent: itemPrinter(lines, "not exported")}
	var res *transfer.ExportResult
	switch {
	case c.Bool("dry-run"):
		out = e.stdout // the plan is the result, whatever --to says
		if _, lerr := os.Lstat(to); lerr == nil && to != "-" {
			err = fmt.Errorf("%s: %w: an export never writes over a file", to, fs.ErrExist)
		} else if res, err = transfer.PlanExport(c.Context, s, opts); res != nil {
			res.Archive = to
		}
	case to == "-":
		res, err = transfer.Export(c.Context, s, e.stdout, opts)
	default:
		res, err = transfer.ExportToFile(c.Context, s, to, opts)
	}
	bar.Finish()
	switch {
	case errors.Is(err, transfer.ErrNotFound):
		return withHint(err, "'convkit list --all' lists the conversations; nothing was written")
	case errors.Is(err, fs.ErrExist):
		return withHint(err, "name a new file")
	case err != nil:
		return err
	}
	m := res.Manifest
	sum := exportSummary{SchemaVersion: schemaVersion, DryRun: c.Bool("dry-run"), Archive: res.Archive, CreatedAt: m.CreatedAt, Online: m.Online,
		Holder: m.Holder, Requested: m.Requested, Added: res.Added, Conversations: m.Conversations,
		Files: len(m.Files), ArchiveBytes: res.Bytes, Problems: m.Problems}
	for _, f := range m.Files {
		sum.Bytes += f.Size
		sum.LeftOutBytes += f.LeftOut
	}
	if !(to == "-" && !sum.DryRun && e.g.Quiet && !e.g.JSON) {
		if err := e.result(out, "", &sum, func() { printExport(e, out, &sum, m.Files) }); err != nil {
			return err
		}
	}
	if res.Partial() {
		if sum.DryRun {
			return partialf("the export would leave out %d item(s) (see the UNREADABLE lines)", len(m.Problems))
		}
		return partialf("export left out %d item(s) (see the UNREADABLE lines)", len(m.Problems))
	}
	return nil
}

// printExport prints the summary; a dry run's conversations with their files.
func printExport(e *env, w io.Writer, s *exportSummary, files []transfer.File) {
	out := bufio.NewWriter(w) // a write per line was a syscall per conversation
	defer out.Flush()
	for _, c := range s.Conversations {
		if e.g.Quiet {
			break // the summary only
		}
		verb, line, sep := "EXPORTED", text(c.ID)+" "+titleOf(c.Title), ": "
		if !c.Requested {
			verb, line, sep = "ADDED", line+": fork ancestor of "+mapJoin(c.AncestorOf, text, ", "), "; "
		}
		if s.DryRun {
			var n int
			var size int64
			for _, f := range files {
				if f.Conversation == c.ID {
					n, size = n+1, size+f.Size
				}
			}
			verb, line = map[string]string{"EXPORTED": "WOULD EXPORT", "ADDED": "WOULD ADD"}[verb], line+sep+filesAndSize(n, size)
		}
		fmt.Fprintln(out, verb, line)
	}
	if !s.DryRun {
		fmt.Fprintf(out, "Archive: %s\n", text(s.Archive))
		fmt.Fprintf(out, "Summary: conversations=%d, added=%d, files=%d, bytes=%d, archive-bytes=%d, unreadable=%d, online=%s\n",
			len(s.Conversations), len(s.Added), s.Files, s.Bytes, s.ArchiveBytes, len(s.Problems), onlineText(s.Online, s.Holder))
		return
	}
	where := ""
	switch s.Archive {
	case "":
	case "-":
		where = " to stdout"
	default:
		where = " to " + text(s.Archive)
	}
	fmt.Fprintf(out, "Dry run: %d conversation(s) (%d fork ancestor(s) added), %s would be written%s; nothing was written\n",
		len(s.Conversations), len(s.Added), filesAndSize(s.Files, s.Bytes), where)
}

func titleOf(t string) string {
	if t == "" {
		return "(untitled)"
	}
	return quotedTitle(t)
}

// cwdMaps collects repeated --map-cwd OLD=NEW values (a GenericFlag: a
// string slice flag would split paths at commas).
type cwdMaps struct{ maps []transfer.CwdMapping }

func (m *cwdMaps) Set(v string) error {
	cm, err := transfer.ParseCwdMapping(v)
	if err != nil {
		return err
	}
	m.maps = append(m.maps, cm)
	return nil
}

func (m *cwdMaps) String() string {
	if m == nil {
		return ""
	}
	var parts []string
	for _, cm := range m.maps {
		parts = append(parts, cm.From+"="+cm.To)
	}
	return strings.Join(parts, " ")
}

func newImportCommand(e *env) *ucli.Command {
	maps := &cwdMaps{}
	return &ucli.Command{
		Name:      "import",
		Usage:     "verify an export archive, check it against this machine, and put its conversations into the store",
		ArgsUsage: "FILE|-",
		Description: `Reads an archive written by 'convkit export' (a path, or - for stdin).

First it verifies the whole archive, before the store is looked at: it is
extracted into a private staging directory inside the data directory
(files 0600, directories 0700) with every safety check and limit (entries
with absolute paths, "..", links, devices or names outside the layout are
refused, and extraction stops at the free space of the file system), every
file's size and SHA-256 is compared with the manifest and every log is read
strictly (no torn tail, committed length equal to its size). Then it takes
runtime.lock (exit 11 while the runtime holds it) and checks each
conversation before writing anything:

  - its id: a conversation already here whose logs are byte-prefixes of the
    archived ones is updated; an identical one is left alone, as is one
    that is newer here; one that diverged is refused (exit 1, nothing
    written) unless --on-conflict replace (the store's copy is moved to
    <data-dir>/replaced/ and kept) or skip (it stays);
  - its working directory exists here, after --map-cwd OLD=NEW, which is
    recorded as a conversation/cwd-mapped event, never by editing history;
  - its agents and models are configured in the runtime configuration
    (--config FILE, else $CONVKIT_CONFIG, else <data-dir>/config.toml;
    [agents.NAME] and [models.NAME] tables);
  - its fork sources are in the archive or in the store.

--dry-run prints the plan and stops (no lock, nothing written). Otherwise
each conversation directory is renamed into place, and metadata.db, when
present, is updated for what was imported (without a full reindex). Every
conversation that will not open here is listed with the reasons: exit 3.
Importing the same archive again changes nothing. See docs/TRANSFER.md.`,
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "dry-run", Usage: "verify the archive and print the plan; take no lock, write nothing"},
			newChoiceFlag("on-conflict", "for a conversation that diverged from the store's copy: refuse the import, replace the copy (moved aside, kept) or skip it (`ACTION`: refuse, replace, skip)",
				transfer.ConflictRefuse, transfer.ConflictReplace, transfer.ConflictSkip),
			&ucli.GenericFlag{Name: "map-cwd", Value: maps, Usage: "record working directories at or under `OLD=NEW` as under NEW (repeatable)"},
			configFlag(),
		},
		Action: func(c *ucli.Context) error {
			args := c.Args().Slice()
			if len(args) != 1 {
				return usagef(c, "want exactly one FILE (a path, or - for stdin), got %d arguments", len(args))
			}
			if c.IsSet("config") && strings.TrimSpace(c.String("config")) == "" {
				return usagef(c, "--config needs a file")
			}
			return runImport(c, e, args[0], maps.maps)
		},
	}
}

// dryRunMemory is the resident set an import dry run stays within (a real
// import builds an index and is not held to it).
const dryRunMemory = 64 << 20

func runImport(c *ucli.Context, e *env, name string, maps []transfer.CwdMapping) error {
	if c.Bool("dry-run") {
		defer softMemoryLimit(dryRunMemory)()
	}
	dataDir, err := e.g.dataDir()
	if err != nil {
		return err
	}
	r, bar, done, err := e.archiveInput(name, "import")
	if err != nil {
		return err
	}
	defer done()
	s, err := e.openStore(c, dataDir, store.LockNone, store.CreateIfEmpty)
	if err != nil {
		return err
	}
	defer s.Close()
	cfg, explicit := store.RuntimeConfigPath(c.String("config"), e.g.getenv, dataDir)
	opts := transfer.ImportOptions{Archive: name, OnConflict: c.String("on-conflict"), MapCwd: maps,
		DryRun: c.Bool("dry-run"), ConfigPath: cfg, ConfigRequired: explicit,
		Log: e.libraryLines(e.stderr, problemLine)}
	res, err := importStaged(c, e, r, s, opts)
	bar.Finish()
	if res != nil {
		e.warnings(res.Warnings)
		if perr := e.result(e.stdout, "", res, func() { printImport(e, res) }); perr != nil {
			return perr
		}
	}
	switch {
	case errors.Is(err, transfer.ErrConflict):
		return withHint(err, "--on-conflict replace moves the store's copy aside (kept in replaced/); --on-conflict skip keeps it")
	case err != nil:
		return err
	}
	if res.Warned() {
		what := "import finished"
		if res.DryRun {
			what = "the import would finish"
		}
		return partialf("%s with warnings: %d conversation(s) will not open here, %d skipped (--on-conflict skip), %d other warning(s)",
			what, res.Counts.WillNotOpen, res.Counts.Skipped, len(res.Warnings))
	}
	return nil
}

// importStaged verifies the archive before it takes runtime.lock, so the
// runtime waits for the writing only.
func importStaged(c *ucli.Context, e *env, r io.Reader, s *store.Store, opts transfer.ImportOptions) (*transfer.ImportResult, error) {
	sg, err := transfer.Stage(c.Context, r, s, opts)
	if err != nil {
		return nil, err
	}
	defer sg.Close()
	var st *store.Store
	if !opts.DryRun {
		if st, err = e.openStore(c, s.DataDir(), store.LockExclusive, store.CreateIfEmpty); err != nil {
			return nil, err
		}
		defer st.Close()
	}
	return sg.Import(c.Context, st)
}

func printImport(e *env, r *transfer.ImportResult) {
	out := bufio.NewWriter(e.stdout) // a write per line was a syscall per conversation
	defer out.Flush()
	would := ""
	if r.DryRun {
		would = "WOULD "
	}
	for _, p := range r.Conversations {
		notable := p.Action == transfer.ActionConflict || p.Action == transfer.ActionSkip || p.Action == transfer.ActionReplace
		if e.g.Quiet && !notable {
			continue
		}
		w := would // of what a dry run would write
		if !slices.Contains([]string{transfer.ActionImport, transfer.ActionUpdate, transfer.ActionReplace, transfer.ActionSkip}, p.Action) {
			w = ""
		}
		fmt.Fprintf(out, "%s%s %s: %s\n", w, strings.ToUpper(p.Action), text(p.ID), text(p.Detail))
		if p.MovedAside != "" {
			fmt.Fprintf(out, "MOVED ASIDE %s: %s\n", text(p.ID), text(p.MovedAside))
		}
		if p.CwdMappedTo != "" && !e.g.Quiet {
			fmt.Fprintf(out, "%sMAP-CWD %s: %s -> %s\n", would, text(p.ID), text(p.Cwd), text(p.CwdMappedTo))
		}
	}
	for _, p := range r.Conversations {
		if len(p.Problems) > 0 && !e.g.Quiet {
			fmt.Fprintf(out, "WILL NOT OPEN %s: %s\n", text(p.ID), mapJoin(p.Problems, text, "; "))
		}
	}
	done := map[string]string{"updated": "metadata.db updated", "built": "metadata.db built from the store's logs"}[r.Index]
	switch {
	case done != "" && !e.g.Quiet:
		fmt.Fprintf(out, "Index: %s\n", done)
	case r.Index == "failed":
		fmt.Fprintf(out, "Index: metadata.db was not updated (%s); run %s\n", text(r.IndexError), r.IndexAdvice)
	}
	prefix := "Summary"
	if r.DryRun {
		prefix = "Dry run"
	}
	c := r.Counts
	fmt.Fprintf(out, "%s: conversations=%d, imported=%d, updated=%d, unchanged=%d, kept=%d, replaced=%d, skipped=%d, conflicts=%d, cwd-mapped=%d, will-not-open=%d\n",
		prefix, c.Conversations, c.Imported, c.Updated, c.Unchanged, c.Kept, c.Replaced, c.Skipped, c.Conflicts, c.CwdMapped, c.WillNotOpen)
}
