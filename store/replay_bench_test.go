package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/convkit/convkit/convlog"
)

// BenchmarkReplay replays a conversation log of 4,000 turns of three
// sessions, as listing and reindex do for every conversation.
func BenchmarkReplay(b *testing.B) {
	dir := b.TempDir()
	p, err := convLogPath(dir, "c", convlog.CurrentVersion, convlog.Plain)
	if err != nil {
		b.Fatal(err)
	}
	var evs []convlog.Event
	add := func(typ string, v any) {
		d, err := convlog.EncodeData(v)
		if err != nil {
			b.Fatal(err)
		}
		evs = append(evs, convlog.Event{Type: typ, Seq: int64(len(evs)), Time: 1700000000000 + int64(len(evs)), Data: d})
	}
	add(EventConversationCreated, CreatedData{Cwd: "/home/dev/src/app", Agents: []string{"coder"}, Models: []string{"deepseek-pro"}})
	add(EventConversationTitle, TitleData{Title: "Count the Go files"})
	for i := range 3 {
		add(EventSessionStarted, SessionStartedData{SessionID: fmt.Sprintf("session-%d", i), Agent: "coder", Model: "deepseek-pro"})
	}
	for t := range int64(4000) {
		id := fmt.Sprintf("session-%d", t%3)
		add(EventTurnStarted, TurnStartedData{SessionID: id, Turn: t/3 + 1})
		add(EventTurnEnded, TurnEndedData{SessionID: id, Turn: t/3 + 1, Outcome: OutcomeCompleted})
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		b.Fatal(err)
	}
	h := &convlog.Header{Type: convlog.ConversationLog, Version: convlog.CurrentVersion, ID: "c", CreatedAt: 1700000000000}
	w, err := convlog.Create(p, h, evs, convlog.WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	w.Close()
	s := at(dir)
	b.ResetTimer()
	for range b.N {
		info, err := s.ReadConversation("c")
		if err != nil || len(info.Turns) != 4000 {
			b.Fatal(err)
		}
	}
}
