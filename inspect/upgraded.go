package inspect

import (
	"context"
	"fmt"
	"io"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/convlog/upgrade"
)

// Upgraded is a log opened as a version 4 successor of it would hold it:
// an older log upgraded in memory (read-only: nothing is written), with
// its parent's subagent catalog completed from the children its target
// finds; a version 4 log as it is.
type Upgraded struct {
	r *upgrade.Reader
	// Children is how many direct subagent children were found, -1 when
	// they were not looked for (a version 4 log, or a log with no place).
	Children int
	// Warnings are the children that could not be read (their catalog
	// entry says mode "unknown").
	Warnings []string
}

// OpenUpgraded opens t's log for RenderUpgraded and WriteUpgradedJSON.
func OpenUpgraded(t *Target) (*Upgraded, error) {
	hr, err := t.open(convlog.ReaderOptions{})
	if err != nil {
		return nil, err
	}
	h := hr.Header()
	hr.Close()
	u := &Upgraded{Children: -1}
	var facts []upgrade.ChildFact
	if h.Version < convlog.CurrentVersion && h.Type == convlog.SessionLog && t.Children != nil {
		if facts, err = upgrade.CollectChildrenFrom(t.Children, h.ID); err != nil {
			return nil, fmt.Errorf("%s: finding its subagent children: %w", t.Path, err)
		}
		u.Children, u.Warnings = len(facts), upgrade.Warnings(facts)
	}
	if u.r, err = t.OpenV4(upgrade.Options{Children: facts}); err != nil {
		return nil, err
	}
	return u, nil
}

// Close releases the log.
func (u *Upgraded) Close() error { return u.r.Close() }

// note says what was upgraded, for the rendering's header.
func (u *Upgraded) note() string {
	v := u.r.SourceVersion()
	if v >= convlog.CurrentVersion {
		return fmt.Sprintf("stored as format v%d: shown as it is", v)
	}
	children := "its subagent children were not looked for (the log has no place)"
	if u.Children >= 0 {
		children = fmt.Sprintf("%d subagent children found", u.Children)
	}
	return fmt.Sprintf("upgraded in memory from format v%d, nothing written; %s", v, children)
}

// RenderUpgraded is Render of the upgraded events: the version 4 header,
// then the events as a version 4 successor would hold them.
func RenderUpgraded(ctx context.Context, u *Upgraded, w io.Writer, f Filter) error {
	return render(ctx, w, f, u.r.Header(), u.r.Compression(), u.note(), u.r, u.r.SourceStats)
}

// WriteUpgradedJSON is WriteJSON of the upgraded events: each as a
// version 4 successor would hold it, one JSON object per line.
func WriteUpgradedJSON(ctx context.Context, u *Upgraded, w io.Writer, f Filter) error {
	return writeJSONEvents(ctx, u.r, w, f)
}
