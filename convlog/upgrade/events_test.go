package upgrade

import (
	"slices"
	"strings"
	"testing"
)

// TestEvents: Events yields the upgraded events, a damaged source's error
// once, and a loop left early can go on.
func TestEvents(t *testing.T) {
	dir := t.TempDir()
	_, want := v0Expected()
	r, err := Open(writeZstdLog(t, dir, "s0.jsonl.zst", v0Log...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for ev, err := range r.Events() {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(ev.AppendJSON(nil)))
		if len(got) == 2 {
			break
		}
	}
	if st := r.SourceStats(); st.Events < 2 || st.Events >= int64(len(v0Log)-1) {
		t.Fatalf("source stats after a break at the second event: %+v", st)
	}
	for ev, err := range r.Events() {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(ev.AppendJSON(nil)))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Events yielded\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if st := r.SourceStats(); st.Events != int64(len(v0Log)-1) || st.TornTail {
		t.Fatalf("source stats at the end: %+v", st)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	bad := slices.Clone(v0Log)
	bad[7] = `{not json`
	p := writeLog(t, dir, "bad.jsonl", bad...)
	_, wantLines, wantErr := upgradeLines(p, Options{})
	if wantErr == nil {
		t.Fatal("a damaged source read without error")
	}
	r, err = Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got = got[:0]
	errs := 0
	for ev, err := range r.Events() {
		if err != nil {
			if ev != nil || err.Error() != wantErr.Error() {
				t.Fatalf("yielded (%v, %v), want (nil, %v)", ev, err, wantErr)
			}
			errs++
			continue // the loop ends by itself after the error
		}
		got = append(got, string(ev.AppendJSON(nil)))
	}
	if errs != 1 || !slices.Equal(got, wantLines) {
		t.Fatalf("yielded %d errors and\n%s\nwant one and\n%s", errs, strings.Join(got, "\n"), strings.Join(wantLines, "\n"))
	}
}
