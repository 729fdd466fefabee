package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/termtext"
)

// DependencyClosure returns convIDs and every conversation they depend on,
// directly or through other dependencies, sorted. A missing dependency is an
// error wrapping ErrNoConversation that names it.
func (s *Store) DependencyClosure(convIDs ...string) ([]string, error) {
	seen := map[string]bool{}
	queue := append([]string(nil), convIDs...)
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if seen[id] {
			continue
		}
		seen[id] = true
		info, err := s.ReadConversation(id)
		if err != nil {
			return nil, err
		}
		queue = append(queue, Dependencies(info)...)
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}

// convState replays a conversation log.
type convState struct {
	info    ConversationInfo
	renamed bool
	open    map[string]int // session id -> index in info.Turns of its running turn
}

func newConvState(h *convlog.Header, path string) *convState {
	return &convState{
		info: ConversationInfo{ID: h.ID, CreatedAt: msTime(h.CreatedAt), UpdatedAt: msTime(h.CreatedAt),
			LogPath: path, Version: h.Version},
		open: map[string]int{},
	}
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func addUnique(list []string, v string) []string {
	if v == "" || slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// apply replays one event. Event types this build does not know (ignorable
// ones) are skipped.
func (s *convState) apply(e *convlog.Event) error {
	c := &s.info
	t := msTime(e.Time)
	decode := func(v any) error {
		if err := json.Unmarshal(e.Data, v); err != nil {
			return fmt.Errorf("%s at seq %d: invalid data: %v", e.Type, e.Seq, err)
		}
		return nil
	}
	switch e.Type {
	case EventConversationCreated:
		var d CreatedData
		if !fastCreated(e.Data, &d) {
			d = CreatedData{}
			if err := decode(&d); err != nil {
				return err
			}
		}
		c.Cwd = d.Cwd
		for _, a := range d.Agents {
			c.Agents = addUnique(c.Agents, a)
		}
		for _, m := range d.Models {
			c.Models = addUnique(c.Models, m)
		}
		if d.Title != "" {
			c.Title, c.TitleIsAuto, s.renamed = d.Title, false, true
		}
	case EventConversationTitle:
		var d TitleData
		if !fastTitle(e.Data, &d) {
			d = TitleData{}
			if err := decode(&d); err != nil {
				return err
			}
		}
		if !s.renamed {
			c.Title, c.TitleIsAuto = d.Title, true
		}
	case EventConversationRenamed:
		var d RenamedData
		if !fastRenamed(e.Data, &d) {
			d = RenamedData{}
			if err := decode(&d); err != nil {
				return err
			}
		}
		c.Title, c.TitleIsAuto, s.renamed = d.Title, false, true
	case EventConversationArchived:
		c.Archived = true
	case EventConversationUnarchived:
		c.Archived = false
	case EventSessionStarted:
		var d SessionStartedData
		if !fastSessionStarted(e.Data, &d) {
			d = SessionStartedData{}
			if err := decode(&d); err != nil {
				return err
			}
		}
		si := SessionInfo{ID: d.SessionID, Agent: d.Agent, Model: d.Model, ParentSession: d.ParentSession, StartedAt: t}
		if p := c.Session(d.ParentSession); p != nil {
			si.DelegationDepth = p.DelegationDepth + 1
		} else if d.ParentSession != "" {
			si.DelegationDepth = 1
		}
		c.Sessions = append(c.Sessions, si)
		c.Agents = addUnique(c.Agents, d.Agent)
		c.Models = addUnique(c.Models, d.Model)
	case EventTurnStarted:
		var d TurnStartedData
		if !fastTurnStarted(e.Data, &d, c.Sessions) {
			d = TurnStartedData{}
			if err := decode(&d); err != nil {
				return err
			}
		}
		c.Turns = append(c.Turns, TurnInfo{SessionID: d.SessionID, Turn: d.Turn, StartedAt: t})
		s.open[d.SessionID] = len(c.Turns) - 1
	case EventTurnEnded:
		var d TurnEndedData
		if !fastTurnEnded(e.Data, &d, c.Sessions) {
			d = TurnEndedData{}
			if err := decode(&d); err != nil {
				return err
			}
		}
		if i, ok := s.open[d.SessionID]; ok && c.Turns[i].Turn == d.Turn {
			c.Turns[i].EndedAt, c.Turns[i].Outcome = t, d.Outcome
			delete(s.open, d.SessionID)
		} else {
			// An end without its start is kept, so nothing recorded is lost.
			c.Turns = append(c.Turns, TurnInfo{SessionID: d.SessionID, Turn: d.Turn, EndedAt: t, Outcome: d.Outcome})
		}
	case EventConversationForked:
		var d ForkedData
		if err := decode(&d); err != nil {
			return err
		}
		c.ForkedFrom, c.AfterCompaction, c.Fork = d.SourceConversation, d.AfterCompaction, &d
		c.Inherited = append(c.Inherited, d.InheritedSessions...)
	case EventConversationRewound:
		var d RewoundData
		if err := decode(&d); err != nil {
			return err
		}
		c.Rewind = &d
		if c.ForkedFrom == "" {
			c.ForkedFrom = d.SourceConversation
		}
	case EventConversationCwdMapped:
		var d CwdMappedData
		if err := decode(&d); err != nil {
			return err
		}
		c.Cwd = d.To
	case EventDeleteStarted:
		c.Deleting = true
	}
	c.Events++
	c.UpdatedAt = t
	c.RunningTurn = len(s.open) > 0
	return nil
}

// ReadConversation replays conversation convID's log (its highest
// generation) from the disk. It takes no lock and changes nothing: a torn
// tail is ignored (TornTail is set). A missing conversation gives an error
// wrapping ErrNoConversation.
func (s *Store) ReadConversation(convID string) (*ConversationInfo, error) {
	_, _, st, err := s.replayConversation(convID)
	if err != nil {
		return nil, err
	}
	return &st.info, nil
}

// replayConversation finds conversation convID's directory and current log
// and replays it, checking that the log names the conversation its
// directory does.
func (s *Store) replayConversation(convID string) (dir, path string, st *convState, err error) {
	if dir, path, err = s.conversationLog(convID); err != nil {
		return "", "", nil, err
	}
	if st, err = replayFile(path); err != nil {
		return "", "", nil, err
	}
	return dir, path, st, nil
}

func (s *Store) conversationLog(convID string) (dir, path string, err error) {
	if dir, err = s.conversationDir(convID); err != nil {
		return "", "", err
	}
	if path, err = conversationLogPath(dir, convID); err != nil {
		return "", "", err
	}
	return dir, path, nil
}

// ReadConversation replays the log, a conversation log, from its current
// generation: title, sessions, turns, running or idle, fork lineage. Its
// header must name the conversation its directory names (a
// *convlog.IdentityError otherwise).
func (l Log) ReadConversation() (*ConversationInfo, error) {
	r, err := l.Open(convlog.ReaderOptions{})
	if err != nil {
		return nil, err
	}
	return l.ReadConversationFrom(r)
}

// ReadConversationFrom replays the conversation log from r, a read of its
// bytes made elsewhere (held in memory, a copy of its committed prefix)
// with the log's ReaderOptions, and closes r.
func (l Log) ReadConversationFrom(r *convlog.Reader) (*ConversationInfo, error) {
	st, err := replay(r, l.Path)
	if err != nil {
		return nil, err
	}
	return &st.info, nil
}

func replayFile(path string) (*convState, error) {
	r, err := openLog(path, convlog.ReaderOptions{})
	if err != nil {
		return nil, err
	}
	return replay(r, path)
}

// replay replays the conversation log r reads, and closes r.
func replay(r *convlog.Reader, path string) (*convState, error) {
	defer r.Close()
	p := newReplayer(r, path)
	if p.err != nil {
		return nil, p.err
	}
	for e, err := range r.Events() {
		if err != nil {
			return nil, err
		}
		if p.Add(e); p.err != nil {
			return nil, p.err
		}
	}
	if _, err := p.Finish(r); err != nil {
		return nil, err
	}
	return p.st, nil
}

// currentGeneration finds the highest generation of base in dir (ties: the
// first by name, as Walk decides). Only regular files count.
func currentGeneration(dir, base string) (convlog.Name, bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return convlog.Name{}, false, err
	}
	var best convlog.Name
	found := false
	var odd error // an entry named like a generation that is not a regular file
	for _, e := range entries {
		n, ok := convlog.ParseName(e.Name())
		if !ok || n.Base != base {
			continue
		}
		if !e.Type().IsRegular() {
			if odd == nil {
				odd = notALog(filepath.Join(dir, e.Name()), e.Type())
			}
			continue
		}
		if !found || n.Version > best.Version || (n.Version == best.Version && n.String() < best.String()) {
			best, found = n, true
		}
	}
	if !found && odd != nil {
		// Say what is in the log's place: "no log" alone would hide it.
		return best, false, odd
	}
	return best, found, nil
}

// notALog refuses an entry in a log's place that is not a regular file.
func notALog(p string, t fs.FileMode) error {
	if t&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link: %w", p, ErrSymlink)
	}
	return fmt.Errorf("%s: %s (%s)", p, ReasonNotRegular, durable.Kind(t))
}

func conversationLogPath(dir, convID string) (string, error) {
	n, ok, err := currentGeneration(dir, ConversationLogBase)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !ok) {
		return "", fmt.Errorf("conversation %s: %w", termtext.Quote(convID), ErrNoConversation)
	}
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, n.String()), nil
}

// sessionLogFile returns the path of the highest generation of session
// sessionID's log in conversation convID.
func (s *Store) sessionLogFile(convID, sessionID string) (string, error) {
	dir, err := s.conversationDir(convID)
	if err != nil {
		return "", err
	}
	base, err := EncodeBase(sessionID)
	if err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	n, ok, err := currentGeneration(dir, base)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !ok) {
		return "", fmt.Errorf("conversation %s has no log for session %s: %w", termtext.Quote(convID), termtext.Quote(sessionID), fs.ErrNotExist)
	}
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, n.String()), nil
}
