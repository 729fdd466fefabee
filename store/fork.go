package store

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/rawjson"
	"github.com/convkit/convkit/internal/termtext"
)

// forkScan is what a first pass over the source session finds (-1: none).
type forkScan struct {
	header      *convlog.Header
	lastSeq     int64
	compactions []int64 // where the session compacted, after what it inherits
	firstUser   int64   // the first of the user's messages
	endSeed     int64   // the last inherited session/end-seed
	composer    string
	cut         int64
}

// compactedBy reports whether the session compacted at or before seq cut.
func (sc *forkScan) compactedBy(cut int64) bool {
	return len(sc.compactions) > 0 && sc.compactions[0] <= cut
}

// fork copies root session srcSession of srcConvID through seq throughSeq
// (-1: all) into the new conversation newConv as root session newSession
// (Session.Fork), or, when rewindSeq is not -1, up to just before the
// user's message at rewindSeq, returning its text (Session.Rewind).
func (s *Store) fork(srcConvID, srcSession, newConv, newSession string, throughSeq, rewindSeq int64) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return "", err
	}
	name, err := SessionLogName(newSession, convlog.CurrentVersion, s.comp)
	if err != nil {
		return "", err
	}
	srcConv, err := s.liveConv(srcConvID)
	if err != nil {
		return "", err
	}
	srcInfo := srcConv.st.info.clone()
	sess := srcInfo.Session(srcSession)
	if sess == nil {
		return "", fmt.Errorf("conversation %s has no session %s", termtext.Quote(srcConvID), termtext.Quote(srcSession))
	}
	if sess.ParentSession != "" {
		return "", fmt.Errorf("session %s of conversation %s is a subagent; only the root session can be forked", termtext.Quote(srcSession), termtext.Quote(srcConvID))
	}
	newDir, err := s.newConversationDir(newConv)
	if err != nil {
		return "", err
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(newDir) // nobody's until its conversation log is published
		}
	}()
	src, err := s.FindLog(srcConvID, srcSession)
	if err != nil {
		return "", err
	}
	srcPath := src.Path
	if n := src.Current; n.Version != convlog.CurrentVersion {
		return "", fmt.Errorf("%s: session log is format v%d; upgrade it to v%d (convkit migrate) before forking", srcPath, n.Version, convlog.CurrentVersion)
	}
	sc, err := scanForFork(src, rewindSeq)
	if err != nil {
		return "", err
	}
	cut := throughSeq
	if rewindSeq >= 0 {
		cut = sc.cut
	} else if cut < 0 {
		cut = sc.lastSeq
	}
	if cut > sc.lastSeq {
		return "", fmt.Errorf("%s: seq %d is beyond the log's last event (%d)", srcPath, cut, sc.lastSeq)
	}
	afterCompaction := sc.compactedBy(cut)
	if !afterCompaction && sc.header.IsSeeded && cut < sc.endSeed {
		return "", fmt.Errorf("%s: seq %d is inside the inherited history (through seq %d); fork at or after it", srcPath, cut, sc.endSeed)
	}

	h := &convlog.Header{Type: convlog.SessionLog, Version: convlog.CurrentVersion, ID: newSession,
		CreatedAt: s.nowMs(), Cwd: srcInfo.Cwd, AgentPreset: sc.header.AgentPreset}
	var inherited []InheritedSession
	switch {
	case afterCompaction:
		h.IsSeeded, h.ParentSession = true, srcSession
		inherited = []InheritedSession{{SessionID: newSession, SourceConversation: srcConvID,
			SourceSession: srcSession, ThroughSeq: cut}}
	case sc.header.IsSeeded:
		h.IsSeeded, h.ParentSession = true, sc.header.ParentSession
		for _, in := range srcInfo.Inherited {
			if in.SessionID == srcSession {
				in.SessionID = newSession
				inherited = append(inherited, in)
			}
		}
	}
	sessPath := filepath.Join(newDir, name)
	if afterCompaction {
		err = s.writeSeed(src, sessPath, h, cut)
	} else {
		err = s.copyHistory(src, sessPath, h, cut)
	}
	if err != nil {
		return "", err
	}

	created := CreatedData{Cwd: srcInfo.Cwd, Agents: addUnique([]string{}, sess.Agent), Models: addUnique([]string{}, sess.Model)}
	autoTitle := ""
	if srcInfo.Title != "" {
		if !srcInfo.TitleIsAuto {
			created.Title = srcInfo.Title
		} else if sc.firstUser >= 0 && sc.firstUser <= cut {
			autoTitle = srcInfo.Title
		}
	}
	evs := []convlog.Event{s.convEvent(EventConversationCreated, created),
		s.convEvent(EventSessionStarted, SessionStartedData{SessionID: newSession, Agent: sess.Agent, Model: sess.Model})}
	if autoTitle != "" {
		evs = append(evs, s.convEvent(EventConversationTitle, TitleData{Title: autoTitle}))
	}
	evs = append(evs, s.convEvent(eventConversationForked, ForkedData{SessionID: newSession, SourceConversation: srcConvID,
		SourceSession: srcSession, ThroughSeq: cut, AfterCompaction: afterCompaction, InheritedSessions: inherited}))
	if rewindSeq >= 0 {
		evs = append(evs, s.convEvent(eventConversationRewound, RewoundData{SourceConversation: srcConvID, SourceSession: srcSession,
			BeforeSeq: rewindSeq, ComposerText: sc.composer}))
	}
	if err := s.createLog(newConv, newDir, evs, nil); err != nil {
		return "", err
	}
	s.tellIndex(s.convs[newConv], true)
	done = true
	return sc.composer, nil
}

func scanForFork(l Log, rewindSeq int64) (*forkScan, error) {
	path := l.Path
	r, err := l.Open(convlog.ReaderOptions{})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	sc := &forkScan{header: r.Header(), lastSeq: -1, firstUser: -1, endSeed: -1, cut: -1}
	turnStart := int64(-1) // seq of the open turn's turn/start
	turnContent := false   // the open turn has history beyond system/message
	foundRewind := false
	admitted := map[string]int64{} // the seq that admitted each message, left out with it
	for e, err := range r.Events() {
		if err != nil {
			return nil, err
		}
		sc.lastSeq = e.Seq
		switch e.Type {
		case convlog.TypeTurnStart:
			turnStart, turnContent = e.Seq, false
		case convlog.TypeInboxSpliced:
			if rewindSeq >= 0 {
				var d convlog.InboxSplicedData
				json.Unmarshal(e.Data, &d)
				for _, m := range d.Inserted {
					id := str(rawjson.Get(m, "id"))
					if _, ok := admitted[id]; !ok && id != "" {
						admitted[id] = e.Seq
					}
				}
			}
		case convlog.TypeTurnEnd:
			turnStart = -1
		case convlog.TypeCompactionEnd:
			sc.compactions = append(sc.compactions, e.Seq)
		case convlog.TypeEndSeed:
			var d endSeed
			if json.Unmarshal(e.Data, &d) == nil && d.Inherited {
				sc.endSeed = e.Seq
			}
		case convlog.TypeUserMessage:
			kind := str(rawjson.Get(rawjson.Get(e.Data, "source"), "kind"))
			if kind == string(convlog.SourceCheckpoint) {
				sc.compactions = append(sc.compactions, e.Seq)
			}
			if kind == string(convlog.SourceUser) && sc.firstUser < 0 {
				sc.firstUser = e.Seq
			}
			if e.Seq == rewindSeq {
				if kind != string(convlog.SourceUser) {
					return nil, fmt.Errorf("%s: seq %d is a %s message, not one of the user's", path, e.Seq, termtext.Quote(kind))
				}
				foundRewind = true
				_, sc.composer = convlog.MessageText(e.Data)
				sc.cut = e.Seq - 1
				if turnStart >= 0 && !turnContent {
					sc.cut = turnStart - 1
				}
				if a, ok := admitted[str(rawjson.Get(e.Data, "id"))]; ok && a == sc.cut {
					sc.cut--
				}
			}
		}
		if e.Seq == rewindSeq && !foundRewind {
			return nil, fmt.Errorf("%s: seq %d is a %s event, not one of the user's messages", path, e.Seq, e.Type)
		}
		if convlog.IsSurface(e.Type) && e.Type != convlog.TypeSystemMessage {
			turnContent = true
		}
		if rewindSeq >= 0 && foundRewind && e.Seq >= rewindSeq {
			break
		}
	}
	if rewindSeq >= 0 && !foundRewind {
		return nil, fmt.Errorf("%s: no event at seq %d", path, rewindSeq)
	}
	// Compacted in the conversation this one inherits from: a copy keeps
	// that dependency.
	sc.compactions = slices.DeleteFunc(sc.compactions, func(at int64) bool { return at <= sc.endSeed })
	return sc, nil
}

// endSeed is the data of session/end-seed.
type endSeed struct {
	Inherited bool `json:"inherited"`
}

// forkedToolResult is the error result of tool call callID a fork cut off,
// its id made from the seq it is written at.
func forkedToolResult(turn, step int64, callID string, seq, now int64) (convlog.Event, error) {
	msg, err := convlog.NewToolMessage(fmt.Sprintf("forked-tool-result-%s-%d", callID, seq), callID, true,
		[]convlog.Block{convlog.TextBlock("The tool call was cut off when the conversation was forked. Retry it if it is still needed.")})
	if err != nil {
		return convlog.Event{}, fmt.Errorf("closing turn %d at the fork: %w", turn, err)
	}
	e := typed(convlog.TypeToolResult, convlog.ToolResultData{Turn: turn, Step: step, Message: msg.JSON()})
	e.Time, e.SurfaceOp = now, &convlog.SurfaceOp{}
	return e, nil
}

// closing returns the events that close ts's compaction and turn at a cut;
// next is the first one's seq.
func closing(ts convlog.TurnState, next, now int64) ([]convlog.Event, error) {
	var evs []convlog.Event
	if open := ts.Compaction; open != nil {
		open.Error = "the conversation was forked before the compaction ended"
		evs = append(evs, typed(convlog.TypeCompactionEnd, open))
	}
	if !ts.Open {
		return evs, nil
	}
	if ts.StepOpen {
		for _, c := range ts.Calls {
			e, err := forkedToolResult(ts.Turn, ts.Step, c.ID, next+int64(len(evs)), now)
			if err != nil {
				return nil, err
			}
			evs = append(evs, e)
		}
		evs = append(evs, typed(convlog.TypeStepEnd, convlog.TurnStep{Turn: ts.Turn, Step: ts.Step}))
	}
	evs = append(evs, typed(convlog.TypeTurnEnd, convlog.TurnEndData{Turn: ts.Turn, Reason: convlog.TurnEndReason{Kind: "forked"}}))
	for i := range evs {
		evs[i].Time = now
	}
	return evs, nil
}

// batcher streams events into a new log, staged in batches of at most
// 1,024 events or 4 MiB so memory stays flat; the first error sticks.
type batcher struct {
	w        *convlog.Writer
	n, bytes int
	err      error
}

func (s *Store) newBatcher(path string, h *convlog.Header) (*batcher, error) {
	w, err := convlog.Create(path, h, nil, convlog.WriterOptions{Compression: s.comp})
	return &batcher{w: w}, err
}

func (b *batcher) add(e convlog.Event) {
	if b.err == nil {
		b.err = b.w.Stage([]convlog.Event{e})
	}
	b.n++
	b.bytes += len(e.Data)
	if b.err == nil && (b.n >= 1024 || b.bytes >= 4<<20) {
		b.n, b.bytes, b.err = 0, 0, b.w.Flush()
	}
}

// close flushes and closes the log, returning err first.
func (b *batcher) close(err error) error {
	if err == nil && b.err == nil {
		b.err = b.w.Flush()
	}
	return errors.Join(cmp.Or(err, b.err), b.w.Close())
}

// eventsThrough calls fn with each event of the log l through cut.
func eventsThrough(l Log, cut int64, fn func(*convlog.Event) error) error {
	if cut < 0 {
		return nil
	}
	r, err := l.Open(convlog.ReaderOptions{})
	if err != nil {
		return err
	}
	defer r.Close()
	for e, err := range r.Events() {
		if err != nil {
			return err
		}
		if e.Seq > cut {
			break
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// copyHistory copies events 0..cut of src into a new log, closing an open
// turn as the new log's writer finds it.
func (s *Store) copyHistory(src Log, dst string, h *convlog.Header, cut int64) error {
	b, err := s.newBatcher(dst, h)
	if err != nil {
		return err
	}
	err = eventsThrough(src, cut, func(e *convlog.Event) error {
		b.add(*e)
		return b.err
	})
	if err == nil && b.err == nil {
		var evs []convlog.Event
		if evs, err = closing(b.w.Turn(), b.w.NextSeq(), s.nowMs()); err != nil {
			err = fmt.Errorf("%s: %w", src.Path, err)
		}
		for _, e := range evs {
			b.add(e)
		}
	}
	return b.close(err)
}

// writeSeed writes a seeded log: the history the model reads at cut, error
// results for unanswered tool calls and the session/end-seed marker.
func (s *Store) writeSeed(src Log, dst string, h *convlog.Header, cut int64) error {
	var order []int64
	var hist convlog.History
	err := eventsThrough(src, cut, func(e *convlog.Event) error {
		if err := hist.Apply(e); err != nil {
			return fmt.Errorf("%s: %w", src.Path, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	keep := map[int64]convlog.Event{}
	for _, m := range hist.Messages() {
		order = append(order, m.Seq)
		keep[m.Seq] = convlog.Event{}
	}
	app := &convlog.SurfaceOp{}
	err = eventsThrough(src, cut, func(ev *convlog.Event) error {
		if _, ok := keep[ev.Seq]; ok {
			keep[ev.Seq] = convlog.Event{Type: ev.Type, Time: ev.Time, Data: bytes.Clone(ev.Data), SurfaceOp: app, Ignorable: ev.Ignorable}
		}
		return nil
	})
	if err != nil {
		return err
	}
	b, err := s.newBatcher(dst, h)
	if err != nil {
		return err
	}
	var pending []string
	var last convlog.TurnStep
	for _, seq := range order {
		e := keep[seq]
		msg := convlog.MessageOf(&e)
		switch e.Type {
		case convlog.TypeAssistantMessage:
			json.Unmarshal(e.Data, &last)
			rawjson.EachElement(rawjson.Get(msg, "content"), func(_ int, blk []byte) bool {
				if id := str(rawjson.Get(blk, "id")); str(rawjson.Get(blk, "type")) == "tool-call" && id != "" {
					pending = append(pending, id)
				}
				return true
			})
		case convlog.TypeToolResult:
			call := str(rawjson.Get(msg, "toolCallId"))
			pending = slices.DeleteFunc(pending, func(id string) bool { return id == call })
		}
		b.add(e)
	}
	now := s.nowMs()
	for _, id := range pending {
		e, err := forkedToolResult(last.Turn, last.Step, id, b.w.NextSeq(), now)
		if err != nil {
			return b.close(fmt.Errorf("%s: %w", src.Path, err))
		}
		b.add(e)
	}
	end := typed(convlog.TypeEndSeed, endSeed{Inherited: true})
	end.Time = now
	b.add(end)
	return b.close(nil)
}
