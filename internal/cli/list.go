package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

func newListCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:  "list",
		Usage: "list conversations, newest first",
		Description: `Lists conversations from metadata.db when it is present and current (every
conversation indexed with the logs it has now), else by replaying the
conversation logs, and then says so on stderr. It takes no lock.

FLAGS says "will not open" for a conversation that will not open on this
machine (a missing working directory, an agent or model the runtime
configuration lacks, a missing fork source): from the index, as found when
its row was written; from the logs, checked now. --will-not-open lists
only those, with a WHY column.`,
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "archived", Usage: "list archived conversations instead"},
			&ucli.BoolFlag{Name: "all", Usage: "list archived and other conversations"},
			&ucli.IntFlag{Name: "limit", Usage: "list at most `N` conversations"},
			&ucli.BoolFlag{Name: "will-not-open", Usage: "list only conversations that will not open on this machine, and why"},
			configFlag(),
		},
		Action: withArgs(0, 0, func(c *ucli.Context) error {
			if c.Int("limit") < 0 {
				return usagef(c, "--limit must not be negative")
			}
			s, err := e.openStore(c, "", store.LockNone, store.CreateNever)
			if err != nil {
				return err
			}
			defer s.Close()
			m, err := e.loadMachineLenient(c, s.DataDir(), "")
			if err != nil {
				return err
			}
			l, err := reindex.List(c.Context, s, reindex.ListOptions{Archived: c.Bool("archived"), All: c.Bool("all"),
				Limit: c.Int("limit"), WillNotOpen: c.Bool("will-not-open"), Machine: m})
			if err != nil {
				return err
			}
			e.warnings(l.Warnings)
			if l.Source == "logs" && !e.g.Quiet {
				fmt.Fprintf(e.stderr, "convkit: listing from the logs: %s\n", text(l.FallbackReason))
			}
			for _, s := range l.Skipped {
				// withPath: a reason an older convkit recorded in the index
				// may name the path already.
				fmt.Fprintf(e.stderr, "convkit: warning: %s\n", text(withPath(s.Path, s.Reason)))
			}
			return e.result(e.stdout, "", l, func() { renderList(e, l.Conversations, c.Bool("will-not-open")) })
		}),
	}
}

// renderList writes a table; why adds why a conversation will not open.
func renderList(e *env, rows []index.Summary, why bool) {
	head := []string{"ID", "TITLE", "UPDATED", "SESSIONS", "TURNS", "FLAGS"}
	if why {
		head = append(head, "WHY")
	}
	t := termtext.NewTable(e.stdout, head...)
	for _, r := range rows {
		flags := labels(label{r.Archived, "archived"}, label{r.RunningTurn, "running"},
			label{r.ForkedFrom != "", "fork of " + text(r.ForkedFrom)}, label{len(r.WillNotOpen) > 0, "will not open"})
		row := []string{text(r.ID), title(r.Title), time.UnixMilli(r.UpdatedAt).UTC().Format("2006-01-02 15:04"),
			strconv.Itoa(r.Sessions), strconv.Itoa(r.Turns), strings.Join(flags, ", ")}
		if why {
			row = append(row, text(strings.Join(r.WillNotOpen, "; ")))
		}
		t.Row(row...)
	}
	t.Flush()
}

func newSearchCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:      "search",
		Usage:     "search message text in metadata.db",
		ArgsUsage: "QUERY",
		Description: `Searches the text of user and assistant messages with SQLite FTS5 (query
syntax: words, "phrases", prefix*, AND/OR/NOT). Needs metadata.db; run
convkit reindex first. It takes no lock.`,
		Flags: []ucli.Flag{
			&ucli.IntFlag{Name: "limit", Value: 20, Usage: "show at most `N` matches (a positive whole number)"},
		},
		Action: withArgs(1, 1, func(c *ucli.Context) error {
			if c.Int("limit") < 1 {
				return usagef(c, "--limit must be a positive number")
			}
			s, err := e.openStore(c, "", store.LockNone, store.CreateNever)
			if err != nil {
				return err
			}
			defer s.Close()
			db, err := index.OpenRead(c.Context, s.IndexPath(), index.ReadOptions{})
			if errors.Is(err, fs.ErrNotExist) {
				// The index is what search reads; the system's own words
				// for a missing file (lstat …) say less.
				err = fmt.Errorf("search reads metadata.db, and %s does not exist", s.IndexPath())
			}
			if index.IsLocked(err) {
				return withHint(err, "search again once the other process is done")
			}
			if err != nil {
				return withHint(err, "run convkit reindex to build metadata.db")
			}
			defer db.Close()
			hits, err := db.Search(c.Context, c.Args().First(), c.Int("limit"))
			if err != nil {
				return err
			}
			if e.g.JSON {
				return writeJSON(e.stdout, struct {
					SchemaVersion int         `json:"schemaVersion"`
					Query         string      `json:"query"`
					Hits          []index.Hit `json:"hits"`
				}{schemaVersion, c.Args().First(), hits})
			}
			for _, h := range hits {
				fmt.Fprintf(e.stdout, "%s  %s  %s#%d %s: %s\n", text(h.ConversationID), quotedTitle(h.Title), text(h.SessionID), h.Seq, text(h.Role), text(h.Snippet))
			}
			return nil
		}),
	}
}
