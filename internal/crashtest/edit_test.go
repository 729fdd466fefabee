//go:build unix

package crashtest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convkit/convkit/store"
)

// delete A B C D E (the first with its deletion already recorded):
// compared is `list --json --all`.
// After a kill, each of them is whole, carries its tombstone, is an empty
// directory or is gone; every other log is untouched. The rerun reports
// every conversation the kill left gone as "already deleted".
func deleteJob(h *harness, in *inputs) *job {
	return &job{name: "delete", prepare: func(t *testing.T, dir string) *trial {
		data := filepath.Join(dir, "data")
		copyTree(t, in.live, data)
		root := store.ConversationsDir(data)
		orig := hashTree(t, root, nil)
		going := map[string]string{} // directory name -> id
		for _, id := range in.deleteIDs {
			name, err := store.EncodeSegment(id)
			if err != nil {
				t.Fatal(err)
			}
			going[name] = id
		}
		isGoing := func(rel string) bool { _, ok := going[strings.Split(rel, "/")[0]]; return ok }
		sizes := dirSums(t, root)
		return &trial{
			args:    append([]string{"--data-dir", data, "delete"}, in.deleteIDs...),
			dataDir: data,
			scan:    []string{data},
			intact: func(t *testing.T, at string) {
				// Every other log untouched; of those being deleted, a file
				// may be gone, or have grown by the tombstone, no more.
				others := map[string]string{}
				for rel, sum := range orig {
					if !isGoing(rel) {
						others[rel] = sum
					}
				}
				sameFiles(t, at, root, others, nil)
				for name := range going {
					if files := sizes[name]; !extendsOrGone(t, filepath.Join(root, name), files) {
						t.Fatalf("%s: a log of %s, which is being deleted, changed other than by an append", at, name)
					}
				}
			},
			published: func(t *testing.T, at string, _ map[string]string) {
				for name, id := range going {
					ents, err := os.ReadDir(filepath.Join(root, name))
					if errors.Is(err, fs.ErrNotExist) || err == nil && len(ents) == 0 {
						continue
					}
					if err != nil {
						t.Fatal(err)
					}
					// Whole or tombstoned: its log reads, and every log
					// left reads to its end.
					if _, err := reader(t, data).ReadConversation(id); err != nil {
						t.Fatalf("%s: conversation %s is neither whole nor tombstoned nor gone: %v", at, id, err)
					}
					for rel, sum := range hashTree(t, filepath.Join(root, name), nil) {
						if orig[name+"/"+rel] != sum {
							mustRead(t, at, filepath.Join(root, name, rel))
						}
					}
				}
			},
			result: func(t *testing.T) map[string]string {
				return map[string]string{"list": h.must(t, 0, "--data-dir", data, "--json", "list", "--all").stdout}
			},
			rerunCheck: func(t *testing.T, at string) func(string) {
				var gone []string
				for name, id := range going {
					if _, err := os.Lstat(filepath.Join(root, name)); errors.Is(err, fs.ErrNotExist) {
						gone = append(gone, id)
					}
				}
				t.Logf("%s: %d of %d gone before the rerun", at, len(gone), len(going))
				return func(stdout string) {
					for _, id := range gone {
						if !strings.Contains(stdout, "already deleted "+id+"\n") {
							t.Fatalf("%s: %s was gone before the rerun, which does not report it as already deleted:\n%s", at, id, stdout)
						}
					}
					for _, id := range in.deleteIDs {
						if !strings.Contains(stdout, "deleted "+id+"\n") {
							t.Fatalf("%s: the rerun does not report %s:\n%s", at, id, stdout)
						}
					}
				}
			},
		}
	}}
}

// extendsOrGone reports whether each file of files under dir is gone or
// holds its old bytes as a prefix.
func extendsOrGone(t *testing.T, dir string, files map[string]fileSum) bool {
	t.Helper()
	for rel, f := range files {
		p := filepath.Join(dir, rel)
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if !extends(t, dir, map[string]fileSum{rel: f}, false) {
			return false
		}
	}
	return true
}

// restore --conversation FORK into another store: the fork made after a
// compaction and the conversation it reads older history from, staged in
// the store, moved in, then reindexed. Compared are the target's logs,
// byte for byte, and `list --json --all`. After a kill, the target's own
// conversations are untouched and each restored one is whole, as archived.
func restoreConversationJob(h *harness, in *inputs) *job {
	return &job{name: "restore --conversation", prepare: func(t *testing.T, dir string) *trial {
		arch := filepath.Join(dir, "in", "backup.tar.zst")
		copyFile(t, in.archive, arch)
		archHash := fileHash(t, arch)
		target := filepath.Join(dir, "store")
		copyTree(t, in.oldStore, target)
		root := store.ConversationsDir(target)
		orig := hashTree(t, root, nil)
		archived := store.ConversationsDir(in.archiveTree)
		own := origDirs(orig)
		return &trial{
			args:    []string{"-q", "restore", "--conversation", in.forkID, "--to", target, arch},
			dataDir: target,
			scan:    []string{target},
			intact: func(t *testing.T, at string) {
				if fileHash(t, arch) != archHash {
					t.Fatalf("%s: the archive changed", at)
				}
				sameFiles(t, at, root, orig, nil)
			},
			published: func(t *testing.T, at string, _ map[string]string) {
				ents, err := os.ReadDir(root)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range ents {
					if isTemp(e.Name()) || own[e.Name()] {
						continue
					}
					if !equalMaps(hashTree(t, filepath.Join(root, e.Name()), nil), hashTree(t, filepath.Join(archived, e.Name()), nil)) {
						t.Fatalf("%s: %s is in the target, but not whole as archived", at, e.Name())
					}
				}
			},
			result: func(t *testing.T) map[string]string { return restoredDigest(t, h, target) },
		}
	}}
}

// origDirs are the directories of the files of orig (relative to a
// conversations directory).
func origDirs(orig map[string]string) map[string]bool {
	out := map[string]bool{}
	for rel := range orig {
		out[strings.Split(rel, "/")[0]] = true
	}
	return out
}
