package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/termtext"
)

// AutoTitle is the automatic title of a first user message: its first
// non-blank line, trimmed and cut to MaxAutoTitleRunes characters.
func AutoTitle(text string) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if utf8.RuneCountInString(line) > MaxAutoTitleRunes {
			r := []rune(line)
			line = strings.TrimRightFunc(string(r[:MaxAutoTitleRunes]), func(r rune) bool { return r == ' ' || r == '\t' })
		}
		return line
	}
	return ""
}

func nonNil(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

func checkCwd(cwd string) error {
	if !filepath.IsAbs(cwd) || !strings.HasPrefix(cwd, "/") {
		return fmt.Errorf("working directory %s is not an absolute path", termtext.Quote(cwd))
	}
	return nil
}

// newConversationDir checks that convID is free and returns its directory.
func (s *Store) newConversationDir(convID string) (string, error) {
	dir, err := conversationPath(s.dataDir, convID)
	if err != nil {
		return "", err
	}
	if _, err := os.Lstat(dir); err == nil {
		return "", fmt.Errorf("conversation %s (%s): %w", termtext.Quote(convID), dir, ErrConversationExists)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	return dir, nil
}

// createLog publishes a new conversation log holding first as its first
// batch, and caches it; mu orders the Session calls on it (nil: a new one).
func (s *Store) createLog(convID, dir string, first []convlog.Event, mu *sync.Mutex) error {
	path := filepath.Join(dir, ConversationLogName(convlog.CurrentVersion, s.comp))
	h := &convlog.Header{Type: convlog.ConversationLog, Version: convlog.CurrentVersion, ID: convID}
	if len(first) > 0 {
		h.CreatedAt = first[0].Time // the creation's own time
	} else {
		h.CreatedAt = s.nowMs()
	}
	w, err := convlog.Create(path, h, first, convlog.WriterOptions{Compression: s.comp})
	if err != nil {
		return err
	}
	st := newConvState(h, path)
	for i := range first {
		first[i].Seq = int64(i)
		if err := st.apply(&first[i]); err != nil {
			w.Close()
			return err
		}
	}
	if mu == nil {
		mu = new(sync.Mutex)
	}
	s.mapMu.Lock()
	s.convs[convID] = &openConv{mu: mu, dir: dir, w: w, st: st}
	s.mapMu.Unlock()
	return nil
}

// CreateConversation creates conversation id working in cwd (an absolute
// path) with the agents and models named so far. The directory must not
// exist.
func (s *Store) CreateConversation(id, cwd string, agents, models []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	if err := checkCwd(cwd); err != nil {
		return err
	}
	dir, err := s.newConversationDir(id)
	if err != nil {
		return err
	}
	ev, err := s.event(EventConversationCreated, CreatedData{Cwd: cwd, Agents: nonNil(agents), Models: nonNil(models)})
	if err != nil {
		return err
	}
	if err := s.createLog(id, dir, []convlog.Event{ev}, nil); err != nil {
		// Nothing refers to a directory without a conversation log.
		os.RemoveAll(dir)
		return err
	}
	s.tellIndex(s.convs[id], true)
	return nil
}

// sessionHeader builds a new session's header in conversation info.
func (s *Store) sessionHeader(info *ConversationInfo, sessionID, parentSession string) (*convlog.Header, error) {
	h := &convlog.Header{Type: convlog.SessionLog, Version: convlog.CurrentVersion, ID: sessionID,
		CreatedAt: s.nowMs(), Cwd: info.Cwd}
	if parentSession != "" {
		p := info.Session(parentSession)
		if p == nil {
			return nil, fmt.Errorf("conversation %s has no session %s to be the parent of %s", termtext.Quote(info.ID), termtext.Quote(parentSession), termtext.Quote(sessionID))
		}
		h.ParentSession, h.Origin, h.DelegationDepth = parentSession, "subagent", p.DelegationDepth+1
	}
	return h, nil
}

func (s *Store) checkNewSession(info *ConversationInfo, sessionID, parentSession string) error {
	if _, err := EncodeBase(sessionID); err != nil {
		return fmt.Errorf("session id: %w", err)
	}
	if info.Session(sessionID) != nil {
		return fmt.Errorf("conversation %s already has session %s", termtext.Quote(info.ID), termtext.Quote(sessionID))
	}
	if parentSession == "" {
		if r := info.RootSession(); r != nil {
			return fmt.Errorf("conversation %s already has root session %s", termtext.Quote(info.ID), termtext.Quote(r.ID))
		}
	} else if info.Session(parentSession) == nil {
		return fmt.Errorf("conversation %s has no session %s to be the parent of %s", termtext.Quote(info.ID), termtext.Quote(parentSession), termtext.Quote(sessionID))
	}
	return nil
}

// StartSession creates session sessionID's log in convID and records
// session/started: the root session when parentSession is "", else a subagent
// one level deeper. The caller appends to the returned writer and closes it.
func (s *Store) StartSession(convID, sessionID, agent, model, parentSession string) (*convlog.Writer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, oc, err := s.startSession(convID, sessionID, agent, model, parentSession)
	if err == nil {
		s.tellIndex(oc, true)
	}
	return w, err
}

// startSession is StartSession under the Store's lock.
func (s *Store) startSession(convID, sessionID, agent, model, parentSession string) (*convlog.Writer, *openConv, error) {
	oc, err := s.liveConv(convID)
	if err != nil {
		return nil, nil, err
	}
	info := &oc.st.info
	if err := s.checkNewSession(info, sessionID, parentSession); err != nil {
		return nil, nil, err
	}
	h, err := s.sessionHeader(info, sessionID, parentSession)
	if err != nil {
		return nil, nil, err
	}
	name, err := SessionLogName(sessionID, convlog.CurrentVersion, s.comp)
	if err != nil {
		return nil, nil, err
	}
	// The log first: the conversation log never names a session whose log
	// was not published.
	w, err := convlog.Create(filepath.Join(oc.dir, name), h, nil, convlog.WriterOptions{Compression: s.comp})
	if err != nil {
		return nil, nil, err
	}
	if err := s.appendEvent(oc, EventSessionStarted, SessionStartedData{SessionID: sessionID, Agent: agent, Model: model, ParentSession: parentSession}); err != nil {
		w.Close()
		return nil, nil, err
	}
	return w, oc, nil
}

// RegisterSession records session/started for a session whose log the
// caller writes itself (import, fixtures writing historical logs). It checks
// the same as StartSession but creates no file.
func (s *Store) RegisterSession(convID, sessionID, agent, model, parentSession string) error {
	return s.change(convID, true, func(oc *openConv) error {
		if err := s.checkNewSession(&oc.st.info, sessionID, parentSession); err != nil {
			return err
		}
		return s.appendEvent(oc, EventSessionStarted, SessionStartedData{SessionID: sessionID, Agent: agent, Model: model, ParentSession: parentSession})
	})
}

// BeginTurn records turn/started for a session. For the root session's
// turns, until the conversation is renamed and while it has no title, the
// automatic title is taken from userText (the user's message) in the same
// batch. A session runs one turn at a time.
func (s *Store) BeginTurn(convID, sessionID string, turn int64, userText string) error {
	return s.change(convID, true, func(oc *openConv) error { return s.beginTurn(oc, sessionID, turn, userText) })
}

// beginTurn is BeginTurn on the open conversation oc.
func (s *Store) beginTurn(oc *openConv, sessionID string, turn int64, userText string) error {
	convID := oc.st.info.ID
	info := &oc.st.info
	sess := info.Session(sessionID)
	if sess == nil {
		return fmt.Errorf("conversation %s has no session %s", termtext.Quote(convID), termtext.Quote(sessionID))
	}
	if i, ok := oc.st.open[sessionID]; ok {
		return fmt.Errorf("conversation %s session %s: turn %d is still running: %w", termtext.Quote(convID), termtext.Quote(sessionID), info.Turns[i].Turn, ErrTurnRunning)
	}
	b := &eventBatch{s: s}
	b.add(EventTurnStarted, TurnStartedData{SessionID: sessionID, Turn: turn})
	if sess.ParentSession == "" && info.Title == "" && !oc.st.renamed {
		if title := AutoTitle(userText); title != "" {
			b.add(EventConversationTitle, TitleData{Title: title})
		}
	}
	if b.err != nil {
		return b.err
	}
	return oc.appendEvents(b.evs...)
}

// EndTurn records turn/ended for the session's running turn.
func (s *Store) EndTurn(convID, sessionID string, turn int64, outcome string) error {
	switch outcome {
	case OutcomeCompleted, OutcomeFailed, OutcomeInterrupted:
	default:
		return fmt.Errorf("turn outcome %s is not %s, %s or %s", termtext.Quote(outcome), OutcomeCompleted, OutcomeFailed, OutcomeInterrupted)
	}
	return s.change(convID, true, func(oc *openConv) error { return s.endTurn(oc, sessionID, turn, outcome) })
}

// endTurn is EndTurn on the open conversation oc.
func (s *Store) endTurn(oc *openConv, sessionID string, turn int64, outcome string) error {
	convID := oc.st.info.ID
	i, ok := oc.st.open[sessionID]
	if !ok || oc.st.info.Turns[i].Turn != turn {
		return fmt.Errorf("conversation %s session %s has no running turn %d", termtext.Quote(convID), termtext.Quote(sessionID), turn)
	}
	return s.appendEvent(oc, EventTurnEnded, TurnEndedData{SessionID: sessionID, Turn: turn, Outcome: outcome})
}

// MaxTitleRunes bounds a title Rename records, in characters (Unicode code
// points): every renderer would otherwise carry a title of megabytes.
const MaxTitleRunes = 256

// TitleError is a title CheckTitle refuses.
type TitleError struct{ Reason string }

func (e *TitleError) Error() string { return e.Reason }

// CheckTitle returns title as Rename records it (without leading and
// trailing white space), or why it cannot be one (a *TitleError): a title
// is valid UTF-8, not empty, one line without control characters, at most
// MaxTitleRunes characters.
func CheckTitle(title string) (string, error) {
	title = strings.TrimSpace(title)
	if !utf8.ValidString(title) {
		return "", &TitleError{"a title must be valid UTF-8 text"}
	}
	for i, r := range title {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' {
			return "", &TitleError{fmt.Sprintf("a title is one line of text without control characters (found %U at byte %d)", r, i)}
		}
	}
	if err := checkTitle(title); err != nil {
		return "", err
	}
	return title, nil
}

// checkTitle refuses an empty title, a line break and a title over
// MaxTitleRunes characters.
func checkTitle(title string) error {
	if title == "" {
		return &TitleError{"a title cannot be empty"}
	}
	n := 0
	for i, r := range title {
		switch r {
		case '\n', '\r', '\v', '\f', '\u0085', '\u2028', '\u2029':
			return &TitleError{fmt.Sprintf("a title is one line of text (found %U at byte %d)", r, i)}
		}
		if n++; n > MaxTitleRunes {
			return &TitleError{fmt.Sprintf("a title is at most %d characters (this one is longer at byte %d)", MaxTitleRunes, i)}
		}
	}
	return nil
}

// Rename sets the title, ending automatic titles; a title CheckTitle refuses
// gives a *RecordError (ErrInvalid) and nothing is written.
func (s *Store) Rename(convID, title string) error {
	title, err := CheckTitle(title)
	if err != nil {
		return &RecordError{Conversation: convID, Call: "Rename", Msg: err.Error(), Kind: ErrInvalid}
	}
	return s.change(convID, false, func(oc *openConv) error {
		return s.appendEvent(oc, EventConversationRenamed, RenamedData{Title: title})
	})
}

// Archive hides the conversation from the main list; it changes nothing
// else and does not stop a running turn. Archiving an archived conversation
// records nothing.
func (s *Store) Archive(convID string) error { return s.setArchived(convID, true) }

// Unarchive brings an archived conversation back.
func (s *Store) Unarchive(convID string) error { return s.setArchived(convID, false) }

func (s *Store) setArchived(convID string, archived bool) error {
	typ := EventConversationUnarchived
	if archived {
		typ = EventConversationArchived
	}
	return s.change(convID, false, func(oc *openConv) error {
		if oc.st.info.Archived == archived {
			return errNoChange
		}
		return s.appendEvent(oc, typ, nil)
	})
}

// MapCwd records a new working directory (an absolute path).
func (s *Store) MapCwd(convID, to string) error {
	if err := checkCwd(to); err != nil {
		return err
	}
	return s.change(convID, false, func(oc *openConv) error {
		if oc.st.info.Cwd == to {
			return errNoChange
		}
		return s.appendEvent(oc, EventConversationCwdMapped, CwdMappedData{From: oc.st.info.Cwd, To: to})
	})
}
