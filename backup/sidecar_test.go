package backup

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/convkit/convkit/fixtures"
)

// TestSidecars: a backup into a directory publishes the archive's sidecar;
// listing reads it; a verification records itself in it, and says "stale"
// once the file changes; retention takes a sidecar with its archive, and a
// sidecar left without its archive goes at the next backup.
func TestSidecars(t *testing.T) {
	dataDir, rep := generate(t, 5, 24, false)
	out := filepath.Join(t.TempDir(), "backups")
	base := time.Date(2026, 9, 1, 3, 0, 0, 0, time.UTC)
	var archives []string
	for i := range 3 {
		dr, err := toDir(context.Background(), dataDir, out, DirOptions{Options: Options{Now: fixedClock(base.Add(time.Duration(i) * time.Hour))}})
		if err != nil {
			t.Fatal(err)
		}
		if dr.InfoError != "" {
			t.Fatalf("sidecar: %s", dr.InfoError)
		}
		archives = append(archives, dr.Archive)
	}
	list, err := ListArchives(out)
	if err != nil || len(list) != 3 {
		t.Fatalf("ListArchives: %v, %v", list, err)
	}
	for i, a := range list {
		if a.Path != archives[i] || a.Info == nil || a.InfoError != "" {
			t.Fatalf("archive %d: %+v", i, a)
		}
		if a.Info.Conversations < len(rep.Conversations)-1 || a.Info.Online || a.Info.Size != a.Size || !a.Info.CreatedAt.Equal(a.Time) {
			t.Errorf("sidecar of %s: %+v (size %d, %d conversations generated)", a.Name, a.Info, a.Size, len(rep.Conversations))
		}
		if a.Verification() != VerifiedNever {
			t.Errorf("%s: verified %q before any verify", a.Name, a.Verification())
		}
		fi, err := os.Lstat(infoPath(a.Path))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("sidecar of %s: %v, mode %v", a.Name, err, fi.Mode())
		}
	}

	// latest is the newest archive.
	got, err := ResolveArchive(filepath.Join(out, "latest"))
	if err != nil || got != archives[2] {
		t.Errorf("DIR/latest = %q, %v; want %s", got, err, archives[2])
	}
	if _, err := ResolveArchive(filepath.Join(t.TempDir(), "latest")); err == nil || !strings.Contains(err.Error(), "no archive named convkit-") {
		t.Errorf("latest of an empty directory: %v", err)
	}
	if got, _ := ResolveArchive("-"); got != "-" {
		t.Errorf("- = %q", got)
	}

	// A verification is recorded, with the file's digest. The store's
	// corrupt log makes it invalid: it matches, and a log does not read.
	at := base.Add(10 * time.Hour)
	res, rec, recErr, err := VerifyArchive(context.Background(), archives[2], VerifyOptions{ToolVersion: "test", Now: fixedClock(at)})
	if err != nil || recErr != nil || !res.OK || rec == nil || !rec.OK || len(rec.SHA256) != 64 {
		t.Fatalf("VerifyArchive: %v %v %+v %+v", err, recErr, res, rec)
	}
	corrupt := rep.Find(fixtures.CaseCorrupt)
	if rec.InvalidLogs != 1 || !strings.HasPrefix(rec.Invalid, "conversations/"+corrupt.ID+"/") ||
		strings.Count(rec.Invalid, "conversations/") != 1 {
		t.Errorf("the verification records invalid logs %d, %q; want 1, the corrupt log's, named once", rec.InvalidLogs, rec.Invalid)
	}
	list, _ = ListArchives(out)
	if v := list[2].Verification(); v != VerifiedInvalid || !list[2].Info.Verified.At.Equal(at) {
		t.Errorf("after verify: %q %+v", v, list[2].Info.Verified)
	}
	if list[2].Info.LogCheck != LogCheckStructure || list[1].Info.InvalidLogs != 0 || list[1].Verification() != VerifiedNever {
		t.Errorf("the backup's record: logCheck %q, invalid logs %d, verified %q", list[2].Info.LogCheck, list[1].Info.InvalidLogs, list[1].Verification())
	}
	if list[2].Info.Conversations != res.Expected.Conversations {
		t.Errorf("the sidecar kept %d conversations, the manifest says %d", list[2].Info.Conversations, res.Expected.Conversations)
	}

	// The file changed since: stale. A damaged file: failed, recorded.
	f, err := os.OpenFile(archives[2], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("x"))
	f.Close()
	list, _ = ListArchives(out)
	if v := list[2].Verification(); v != VerifiedStale {
		t.Errorf("after the file changed: %q", v)
	}
	_, rec, recErr, err = VerifyArchive(context.Background(), archives[2], VerifyOptions{Now: fixedClock(at)})
	if err == nil || recErr != nil || rec == nil || rec.OK || rec.Problem == "" {
		t.Fatalf("verify of a damaged archive: %v %v %+v", err, recErr, rec)
	}
	list, _ = ListArchives(out)
	if v := list[2].Verification(); v != VerifiedFailed {
		t.Errorf("after a failed verify: %q", v)
	}

	// An archive without a sidecar gets one from its verification.
	os.Remove(infoPath(archives[1]))
	if _, _, recErr, err := VerifyArchive(context.Background(), archives[1], VerifyOptions{}); err != nil || recErr != nil {
		t.Fatalf("verify without a sidecar: %v %v", err, recErr)
	}
	list, _ = ListArchives(out)
	if list[1].Info == nil || list[1].Info.Conversations == 0 || list[1].Verification() != VerifiedInvalid {
		t.Errorf("sidecar written by verify: %+v", list[1].Info)
	}

	// Not one of convkit's archive names: nothing recorded.
	other := filepath.Join(out, "copy.tar.zst")
	data, _ := os.ReadFile(archives[0])
	os.WriteFile(other, data, 0o600)
	if _, rec, _, err := VerifyArchive(context.Background(), other, VerifyOptions{}); err != nil || rec != nil {
		t.Errorf("verify of copy.tar.zst: %v, recorded %+v", err, rec)
	}
	if _, err := os.Lstat(infoPath(other)); err == nil {
		t.Error("a sidecar was written for a file that is not a convkit archive name")
	}
	os.Remove(other)

	// Retention takes sidecars with their archives; a sidecar whose archive
	// is gone goes at the next backup, as do the temporary files of an
	// archive's and a sidecar's writers killed before they published.
	os.Remove(archives[1])
	for _, final := range []string{archives[1], infoPath(archives[0])} {
		tmp := filepath.Join(out, "."+filepath.Base(final)+".0123456789abcdef.tmp")
		if err := os.WriteFile(tmp, []byte("killed"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dr, err := toDir(context.Background(), dataDir, out, DirOptions{Options: Options{Now: fixedClock(base.Add(20 * time.Hour))}, Retention: Retention{Last: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(out)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	want := []string{filepath.Base(dr.Archive), filepath.Base(infoPath(dr.Archive))}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("after --keep 1: %v, want %v", names, want)
	}
}

// TestSidecarHostile: a sidecar that is a link is not written through; one
// that is too big, or not JSON, or of another archive, is reported and not
// trusted.
func TestSidecarHostile(t *testing.T) {
	dataDir, _ := generate(t, 6, 20, false)
	out := filepath.Join(t.TempDir(), "backups")
	dr, err := toDir(context.Background(), dataDir, out, DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	side := infoPath(dr.Archive)
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep"), 0o600)
	os.Remove(side)
	os.Symlink(victim, side)
	_, _, recErr, err := VerifyArchive(context.Background(), dr.Archive, VerifyOptions{})
	if err != nil || recErr == nil || !strings.Contains(recErr.Error(), "not a regular file") {
		t.Errorf("verify with a linked sidecar: %v, record: %v", err, recErr)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("written through the link: %q", b)
	}
	for name, content := range map[string]string{
		"too big":       `{"format":"convkit-backup-info","archive":"` + strings.Repeat("x", maxInfoBytes) + `"}`,
		"not JSON":      "\x00\x01",
		"other archive": `{"format":"convkit-backup-info","archive":"convkit-20000101T000000Z.tar.zst"}`,
	} {
		os.Remove(side)
		os.WriteFile(side, []byte(content), 0o600)
		list, err := ListArchives(out)
		if err != nil || len(list) != 1 || list[0].Info != nil || list[0].InfoError == "" || list[0].Verification() != VerifiedNever {
			t.Errorf("%s: %+v %v", name, list, err)
		}
	}
}
