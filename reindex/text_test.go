package reindex

import (
	"testing"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
)

// TestEventMessageTextAgrees reads every session log of a generated store
// (every format version, plain and compressed) as readSession does and
// checks that the text indexed from the members the line's check kept is
// the text of a scan of the message, for every message the rules accept.
func TestEventMessageTextAgrees(t *testing.T) {
	dir := t.TempDir()
	if _, err := fixtures.Generate(dir, fixtures.Options{Seed: 11, Conversations: 40}); err != nil {
		t.Fatal(err)
	}
	tree, err := reader(t, dir).Walk()
	if err != nil {
		t.Fatal(err)
	}
	messages, kept := 0, 0
	for _, c := range tree.Conversations {
		for _, l := range c.Logs {
			if l.IsConversationLog {
				continue
			}
			r, err := l.Open(convlog.ReaderOptions{})
			if err != nil {
				continue // the generated store's damaged logs
			}
			rules := convlog.NewValidator(r.Header())
			for e, err := range r.Events() {
				if err != nil {
					t.Logf("%s: %v", l.Path, err)
					break
				}
				if rules.Check(e) != nil {
					break
				}
				m := rules.Message()
				if m == nil {
					continue
				}
				messages++
				r1, t1 := convlog.EventMessageText(e, m)
				r2, t2 := convlog.MessageText(m)
				if r1 != r2 || t1 != t2 {
					t.Fatalf("%s seq %d: EventMessageText = %q, %q; MessageText = %q, %q", l.Path, e.Seq, r1, t1, r2, t2)
				}
				if t1 != "" {
					kept++
				}
			}
			r.Close()
		}
	}
	if messages < 100 || kept < 50 {
		t.Fatalf("only %d messages (%d with text) read: the store is not what the test needs", messages, kept)
	}
}
