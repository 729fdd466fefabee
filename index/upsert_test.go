package index

import "context"

// Upsert replaces one conversation's rows in its own transaction.
func (d *DB) Upsert(ctx context.Context, c *Conversation, msgs []Message) error {
	w, err := d.Begin(ctx)
	if err != nil {
		return err
	}
	if err := w.Put(ctx, c, msgs); err != nil {
		w.Rollback()
		return err
	}
	return w.Commit()
}
