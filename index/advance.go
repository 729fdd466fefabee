package index

import (
	"context"
	"fmt"

	"github.com/convkit/convkit/internal/termtext"
)

// Advance brings the rows of conversation c up to date after appends, in time
// that depends on what changed, not on the conversation's length: the
// conversation row is rewritten, the changed sessions and turns written over
// theirs, and msgs, the messages appended since, added. The row must exist
// (else an error wrapping ErrNotIndexed).
func (w *Writer) Advance(ctx context.Context, c *Conversation, sessionCount, turnCount int, msgs []Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	r, err := w.tx.ExecContext(ctx, `UPDATE conversations SET dir = ?, title = ?, title_is_auto = ?, cwd = ?, created_at = ?,
		updated_at = ?, archived = ?, forked_from = ?, after_compaction = ?, agents = ?, models = ?, running_turn = ?,
		session_count = ?, turn_count = ?, fingerprint = ?, will_not_open = ?, fork_sources = ?, log_identity = ? WHERE id = ?`,
		c.Dir, c.Title, c.TitleIsAuto, c.Cwd, c.CreatedAt, c.UpdatedAt, c.Archived, c.ForkedFrom, c.AfterCompaction,
		jsonList(c.Agents), jsonList(c.Models), c.RunningTurn, sessionCount, turnCount, c.Fingerprint,
		jsonList(c.WillNotOpen), jsonList(c.ForkSources), c.LogIdentity, c.ID)
	if err != nil {
		return fmt.Errorf("update conversation %s: %w", termtext.Quote(c.ID), err)
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("update conversation %s: %w", termtext.Quote(c.ID), ErrNotIndexed)
	}
	for _, s := range c.Sessions {
		// A session indexed keeps its parent, agent and model (its log's
		// header and session/started do not change); a new one gets them.
		r, err := w.tx.ExecContext(ctx, `UPDATE sessions SET format_version = ?, event_count = ?, bytes = ?, file = ?
			WHERE conversation_id = ? AND id = ?`, s.FormatVersion, s.Events, s.Bytes, s.File, c.ID, s.ID)
		var n int64
		if err == nil {
			n, err = r.RowsAffected()
		}
		if err == nil && n == 0 {
			_, err = w.tx.ExecContext(ctx, `INSERT INTO sessions (conversation_id, id, parent_session, agent, model,
				format_version, event_count, bytes, file) VALUES (?,?,?,?,?,?,?,?,?)`,
				c.ID, s.ID, s.ParentSession, s.Agent, s.Model, s.FormatVersion, s.Events, s.Bytes, s.File)
		}
		if err != nil {
			return fmt.Errorf("update session %s of %s: %w", termtext.Quote(s.ID), termtext.Quote(c.ID), err)
		}
	}
	for _, t := range c.Turns {
		if _, err := w.tx.ExecContext(ctx, `INSERT OR REPLACE INTO turns (conversation_id, session_id, turn, started_at,
			ended_at, outcome) VALUES (?,?,?,?,?,?)`, c.ID, t.SessionID, t.Turn, t.StartedAt, t.EndedAt, t.Outcome); err != nil {
			return fmt.Errorf("update turn %d of %s: %w", t.Turn, termtext.Quote(c.ID), err)
		}
	}
	for _, m := range msgs {
		r, err := w.insMessage.ExecContext(ctx, c.ID, m.SessionID, m.Seq, m.Role, m.Text)
		if err == nil {
			var rowid int64
			if rowid, err = r.LastInsertId(); err == nil {
				_, err = w.insMsgRow.ExecContext(ctx, c.ID, rowid)
			}
		}
		if err != nil {
			return fmt.Errorf("index message %d of %s: %w", m.Seq, termtext.Quote(c.ID), err)
		}
	}
	return nil
}

// LogIdentities maps every indexed conversation to the identity of the
// conversation log its row was read from.
func (d *DB) LogIdentities(ctx context.Context) (map[string]string, error) {
	rows, err := d.db.QueryContext(ctx, "SELECT id, log_identity FROM conversations")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, li string
		if err := rows.Scan(&id, &li); err != nil {
			return nil, err
		}
		out[id] = li
	}
	return out, rows.Err()
}

// One reads conversation id's rows (nil when it has none) and, with text,
// the digest of its messages.
func (d *DB) One(ctx context.Context, id string, text bool) (*Conversation, MessageDigest, error) {
	var dg MessageDigest
	all, err := d.all(ctx, id)
	if err != nil || all[id] == nil {
		return nil, dg, err
	}
	if text {
		rows, err := d.db.QueryContext(ctx, `SELECT m.session_id, m.seq, m.role, m.text
			FROM message_rows r JOIN messages m ON m.rowid = r.fts_rowid WHERE r.conversation_id = ?`, id)
		if err != nil {
			return nil, dg, err
		}
		defer rows.Close()
		for rows.Next() {
			var m Message
			if err := rows.Scan(&m.SessionID, &m.Seq, &m.Role, &m.Text); err != nil {
				return nil, dg, err
			}
			dg.Add(m)
		}
		if err := rows.Err(); err != nil {
			return nil, dg, err
		}
	}
	return all[id], dg, nil
}
