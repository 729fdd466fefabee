package archive

import (
	"fmt"
	"io"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/store"
)

// LogRead is what one strict read of a log found.
type LogRead struct {
	Events    int64
	Prefix    convlog.Prefix // what CommittedPrefix would find, when Whole
	Whole     bool
	Recovered int64                   // lines recovered from a torn frame
	Info      *store.ConversationInfo // a conversation log's replay
	InfoErr   error
	RuleErr   error // the first admission failure (with rules)
}

// ReadLog reads generation gen of l from src strictly, as reindex does,
// replaying a conversation log and, with rules, applying convlog's admission.
func ReadLog(src io.ReaderAt, size int64, name string, l store.Log, gen convlog.Name, rules bool) (LogRead, error) {
	comp := gen.Compression
	r, err := convlog.NewReader(src, size, name, l.ReaderOptions(convlog.ReaderOptions{Version: gen.Version, Compression: &comp}))
	if err != nil {
		return LogRead{}, err
	}
	defer r.Close()
	var rd LogRead
	var replay *store.Replayer
	if l.IsConversationLog {
		replay = l.Replayer(r)
	}
	var v *convlog.Validator
	if rules {
		v = convlog.NewValidator(r.Header())
	}
	for e, err := range r.Events() {
		if err != nil {
			return LogRead{}, err
		}
		rd.Events++ // a torn final frame's lines too: the prefix holds them
		if v != nil {
			if err := v.Check(e); err != nil && rd.RuleErr == nil {
				rd.RuleErr = r.RuleProblem(err)
			}
		}
		if replay != nil {
			replay.Add(e)
		}
	}
	if v != nil {
		if err := v.Finish(); err != nil && rd.RuleErr == nil {
			rd.RuleErr = fmt.Errorf("%s: line 1: %w", name, err)
		}
	}
	rd.Prefix, rd.Whole = r.ReadPrefix()
	rd.Recovered = r.Stats().RecoveredLines
	if replay != nil {
		rd.Info, rd.InfoErr = replay.Finish(r)
	}
	return rd, nil
}
