package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/display"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

func newListCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:  "list",
		Usage: "list conversations, newest first",
		Description: `Lists conversations from metadata.db when it is present and current (every
conversation indexed with the logs it has now), else by replaying the
conversation logs, and then says so on stderr. It takes no lock.`,
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "archived", Usage: "list archived conversations instead"},
			&ucli.BoolFlag{Name: "all", Usage: "list archived and other conversations"},
			&ucli.IntFlag{Name: "limit", Usage: "list at most `N` conversations"},
		},
		Action: func(c *ucli.Context) error {
			if err := checkArgs(c, 0, 0); err != nil {
				return err
			}
			if c.Int("limit") < 0 {
				return usagef(c, "--limit must not be negative")
			}
			s, err := e.openStore(c.Context, "list", store.LockNone)
			if err != nil {
				return err
			}
			l, err := reindex.List(c.Context, s, reindex.ListOptions{Archived: c.Bool("archived"), All: c.Bool("all"), Limit: c.Int("limit")})
			if err != nil {
				return err
			}
			if l.Source == "logs" && !e.g.Quiet {
				fmt.Fprintf(e.stderr, "convkit: listing from the logs: %s\n", text(l.FallbackReason))
			}
			for _, s := range l.Skipped {
				fmt.Fprintf(e.stderr, "convkit: warning: %s\n", text(withPath(s.Path, s.Reason)))
			}
			if e.g.JSON {
				return writeJSON(e.stdout, l)
			}
			return renderList(e, l.Conversations)
		},
	}
}

// renderList writes the conversations as a table, its columns aligned by
// display width (a CJK title takes two columns a character).
func renderList(e *env, rows []index.Summary) error {
	t := display.NewTable(e.stdout, "ID", "TITLE", "UPDATED", "SESSIONS", "TURNS", "FLAGS")
	for _, r := range rows {
		var flags []string
		if r.Archived {
			flags = append(flags, "archived")
		}
		if r.RunningTurn {
			flags = append(flags, "running")
		}
		if r.ForkedFrom != "" {
			flags = append(flags, "fork of "+text(r.ForkedFrom))
		}
		title := text(r.Title)
		if title == "" {
			title = "(untitled)"
		}
		t.Row(text(r.ID), title, time.UnixMilli(r.UpdatedAt).UTC().Format("2006-01-02 15:04"),
			strconv.Itoa(r.Sessions), strconv.Itoa(r.Turns), strings.Join(flags, ", "))
	}
	return t.Flush()
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
			&ucli.IntFlag{Name: "limit", Value: 20, Usage: "show at most `N` matches"},
		},
		Action: func(c *ucli.Context) error {
			if err := checkArgs(c, 1, 1); err != nil {
				return err
			}
			if c.Int("limit") < 1 {
				return usagef(c, "--limit must be a positive number")
			}
			s, err := e.openStore(c.Context, "search", store.LockNone)
			if err != nil {
				return err
			}
			db, err := index.OpenRead(c.Context, s.IndexPath(), index.ReadOptions{})
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
				fmt.Fprintf(e.stdout, "%s  %s  %s#%d %s: %s\n", text(h.ConversationID), quoted(h.Title), text(h.SessionID), h.Seq, text(h.Role), text(h.Snippet))
			}
			return nil
		},
	}
}

func newDeleteCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:      "delete",
		Usage:     "delete conversations through the tombstone",
		ArgsUsage: "ID...",
		Description: `Records a delete in each conversation's log (the tombstone), then removes its
directory; metadata.db is updated when present. A delete is refused while a
turn is running. An interrupted delete is finished by the next delete or
reindex. A conversation that forks made after a compaction read older
history from is refused unless those forks are deleted in the same command
or --force is given. Takes runtime.lock.`,
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "force", Usage: "delete even a conversation that forks made after a compaction read older history from"},
		},
		Action: func(c *ucli.Context) error {
			if err := checkArgs(c, 1, -1); err != nil {
				return err
			}
			s, err := e.openStore(c.Context, "delete", store.LockExclusive)
			if err != nil {
				return err
			}
			defer s.Close()
			ids := c.Args().Slice()
			if !c.Bool("force") {
				if err := s.CheckDelete(ids...); err != nil {
					if errors.Is(err, store.ErrHasDependents) {
						return withHint(err, "delete those too (name them in the same command), or pass --force")
					}
					return err
				}
			}
			var db *index.DB
			if d, err := index.Open(s.IndexPath()); err == nil {
				db = d
				defer db.Close()
			}
			for _, id := range ids {
				if err := c.Context.Err(); err != nil {
					return err // interrupted between two deletions
				}
				if err := s.DeleteUnguarded(id); err != nil {
					return err
				}
				if db != nil {
					if err := db.Delete(c.Context, id); err != nil {
						return err
					}
				}
				if !e.g.Quiet {
					fmt.Fprintf(e.stdout, "deleted %s\n", text(id))
				}
			}
			return nil
		},
	}
}
