package backup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"
)

// archivesEvery lists archives taken every step from start to end, oldest
// first, as ListArchives gives them.
func archivesEvery(start, end time.Time, step time.Duration) []ArchiveInfo {
	var list []ArchiveInfo
	for t := start; !t.After(end); t = t.Add(step) {
		name := archiveName(t)
		list = append(list, ArchiveInfo{Name: name, Path: "/b/" + name, Time: t})
	}
	return list
}

// newestPer keeps, by a second way of counting, the newest archive of each
// of the n newest periods key gives.
func newestPer(list []ArchiveInfo, n int, key func(time.Time) string) []string {
	best := map[string]ArchiveInfo{}
	for _, a := range list {
		k := key(a.Time.UTC())
		if b, ok := best[k]; !ok || a.Time.After(b.Time) {
			best[k] = a
		}
	}
	var periods []ArchiveInfo
	for _, a := range best {
		periods = append(periods, a)
	}
	sort.Slice(periods, func(i, j int) bool { return periods[i].Time.After(periods[j].Time) })
	var out []string
	for i := 0; i < n && i < len(periods); i++ {
		out = append(out, periods[i].Path)
	}
	return out
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// TestRetentionPolicies: each of restic's policies keeps what restic's
// forget keeps, counted here another way; together they keep what any of
// them keeps; the archive just written and the newest verified one are
// always kept; no policy keeps everything.
func TestRetentionPolicies(t *testing.T) {
	start := time.Date(2026, 6, 29, 1, 0, 0, 0, time.UTC)
	end := time.Date(2026, 9, 1, 17, 0, 0, 0, time.UTC)
	list := archivesEvery(start, end, 7*time.Hour)
	newest := list[len(list)-1]
	day := func(t time.Time) string { return t.Format("2006-01-02") }
	week := func(t time.Time) string { y, w := t.ISOWeek(); return fmt.Sprint(y, w) }
	month := func(t time.Time) string { return t.Format("2006-01") }
	var within []string
	for _, a := range list {
		if !a.Time.Before(newest.Time.Add(-48 * time.Hour)) {
			within = append(within, a.Path)
		}
	}
	var last3 []string
	for _, a := range list[len(list)-3:] {
		last3 = append(last3, a.Path)
	}
	for _, tc := range []struct {
		name string
		r    Retention
		want []string
	}{
		{"last", Retention{Last: 3}, last3},
		{"within", Retention{Within: Span{Days: 2}}, within},
		{"daily", Retention{Daily: 7}, newestPer(list, 7, day)},
		{"weekly", Retention{Weekly: 4}, newestPer(list, 4, week)},
		{"monthly", Retention{Monthly: 3}, newestPer(list, 3, month)},
		{"all", Retention{Last: 3, Within: Span{Days: 2}, Daily: 7, Weekly: 4, Monthly: 3},
			slices.Concat(last3, within, newestPer(list, 7, day), newestPer(list, 4, week), newestPer(list, 3, month))},
	} {
		got := keysOf(tc.r.keeps(list, newest.Path, newest.Time))
		want := slices.Compact(slices.Sorted(slices.Values(tc.want)))
		if !slices.Equal(got, want) {
			t.Errorf("%s: keeps\n%v\nwant\n%v", tc.name, got, want)
		}
		if len(got) >= len(list) {
			t.Errorf("%s: keeps all %d", tc.name, len(got))
		}
	}
	// The newest verified archive stays, whatever the policy; a failed or
	// stale verification does not count.
	verified := list[10]
	verified.Info = &Info{Verified: &Verification{OK: true}}
	failed := list[20]
	failed.Info = &Info{Verified: &Verification{OK: false}}
	withV := slices.Clone(list)
	withV[10], withV[20] = verified, failed
	kept := Retention{Last: 1}.keeps(withV, newest.Path, newest.Time)
	if !kept[verified.Path] || kept[failed.Path] || len(keysOf(kept)) != 2 {
		t.Errorf("with a verified archive: %v", keysOf(kept))
	}
	// The archive just written stays even when older than all (a clock
	// set back).
	if kept := (Retention{Last: 1}).keeps(list, list[0].Path, newest.Time); !kept[list[0].Path] || !kept[newest.Path] {
		t.Errorf("the new archive with an old name: %v", keysOf(kept))
	}
	if kept := (Retention{}).keeps(list, newest.Path, newest.Time); len(keysOf(kept)) != len(list) {
		t.Errorf("no policy keeps %d of %d", len(keysOf(kept)), len(list))
	}
	// An archive named years ahead (a wrong clock once) is kept, and the
	// policies count from the real archives: Within keeps the same ones.
	future := archivesEvery(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Hour)
	withF := append(slices.Clone(list), future...)
	got := keysOf(Retention{Within: Span{Days: 2}}.keeps(withF, newest.Path, newest.Time))
	want := slices.Sorted(slices.Values(append(slices.Clone(within), future[0].Path)))
	if !slices.Equal(got, want) {
		t.Errorf("with an archive dated 2030: keeps\n%v\nwant\n%v", got, want)
	}
}

// TestRetentionInDirectory: a backup with age policies deletes what its
// dry run said it would, each archive with its sidecar, and nothing else.
func TestRetentionInDirectory(t *testing.T) {
	dataDir, _ := generate(t, 18, 0, false)
	out := t.TempDir()
	// Twenty days of archives, three a day (placeholders: retention reads
	// names only), each with a sidecar.
	start := time.Date(2026, 8, 10, 2, 0, 0, 0, time.UTC)
	for _, a := range archivesEvery(start, start.Add(20*24*time.Hour), 8*time.Hour) {
		p := filepath.Join(out, a.Name)
		os.WriteFile(p, []byte("x"), 0o600)
		os.WriteFile(infoPath(p), []byte("{}"), 0o600)
	}
	os.WriteFile(filepath.Join(out, "notes.txt"), []byte("x"), 0o600)
	now := start.Add(20*24*time.Hour + 8*time.Hour)
	keep := Retention{Within: Span{Days: 1}, Daily: 5, Weekly: 3}
	dry, err := toDir(context.Background(), dataDir, out, DirOptions{Options: Options{Now: fixedClock(now)}, Retention: keep, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := ListArchives(out)
	if len(before) != 61 || len(dry.Deleted) == 0 {
		t.Fatalf("dry run: %d archives there, would delete %d", len(before), len(dry.Deleted))
	}
	res, err := toDir(context.Background(), dataDir, out, DirOptions{Options: Options{Now: fixedClock(now)}, Retention: keep})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Deleted, dry.Deleted) {
		t.Errorf("deleted\n%v\nthe dry run said\n%v", res.Deleted, dry.Deleted)
	}
	after, _ := ListArchives(out)
	if len(after) != 62-len(res.Deleted) || after[len(after)-1].Path != res.Archive {
		t.Errorf("%d archives left of 62 with %d deleted; the newest %s", len(after), len(res.Deleted), after[len(after)-1].Path)
	}
	for _, p := range res.Deleted {
		if _, err := os.Lstat(infoPath(p)); err == nil {
			t.Errorf("the sidecar of %s stayed", p)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "notes.txt")); err != nil {
		t.Error(err)
	}
}
