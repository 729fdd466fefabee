package backup

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/internal/contract"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/progress"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// Errors of Restore that callers tell apart.
var (
	ErrTargetNotEmpty     = errors.New("the target is not empty")
	ErrConversationExists = errors.New("the conversation exists in the target")
	ErrNotInArchive       = errors.New("the conversation is not in the archive")
)

// RestoreOptions configure Restore.
type RestoreOptions struct {
	Archive string // names the archive in messages (a path, or "-")
	Target  string // the directory Restore makes a store of
	// Force replaces the store Restore is given (or, with Conversation, a
	// conversation in it), moving it aside.
	Force        bool
	Conversation string // only it and its fork ancestors
	Limits       archive.Limits
	Jobs         int // parallel reads (default: CPUs)
	Progress     progress.Progress
	// OnEvent receives the mismatches, what the rebuild reports and the
	// staging directories of killed restores removed.
	OnEvent func(store.Item)
	Log     io.Writer // the sweep's notes beside the target
}

// RestoreResult is what Restore did.
type RestoreResult struct {
	SchemaVersion int             `json:"schemaVersion"`
	Archive       string          `json:"archive"`
	Target        string          `json:"target"`
	Verify        *VerifyResult   `json:"verify"`
	MovedAside    string          `json:"movedAside,omitempty"` // where the replaced store or conversation is
	Conversations []string        `json:"conversations"`
	Kept          []string        `json:"kept"`    // fork ancestors already in the target
	Invalid       []store.Item    `json:"invalid"` // logs restored that do not read
	Reindex       *reindex.Result `json:"reindex"`
}

func (res *RestoreResult) restoredInvalid() {
	res.Invalid = []store.Item{}
	dirs := map[string]bool{}
	for _, id := range res.Conversations {
		d, _ := store.EncodeSegment(id) // the ID of a directory
		dirs[path.Join(store.ConversationsDirName, d)] = true
	}
	for _, m := range res.Verify.Invalid {
		if dirs[path.Dir(m.Path)] {
			res.Invalid = append(res.Invalid, m)
		}
	}
}

// Restore verifies the archive read from r, as VerifyArchive does, and
// restores it. With into nil, into opts.Target, missing or empty: staged
// beside it and renamed into place only when all of it verifies. Else into
// the store into, locked exclusively by the caller: with Conversation,
// that conversation and its fork ancestors go into it (ancestors there are
// kept; the conversation is refused unless Force or the same bytes) and it
// is reindexed; without, Force is required, and the restored store takes
// its place (store.Store.ReplaceWith).
func Restore(ctx context.Context, r io.Reader, into *store.Store, opts RestoreOptions) (*RestoreResult, error) {
	switch {
	case into != nil && !into.Writable():
		return nil, fmt.Errorf("%s: %w", into.DataDir(), store.ErrReadOnly)
	case into != nil:
		opts.Target = into.DataDir()
	case opts.Target == "":
		return nil, errors.New("restore needs a target directory")
	}
	target, err := filepath.Abs(opts.Target)
	if err != nil {
		return nil, err
	}
	opts.Target = target
	if opts.Progress == nil {
		opts.Progress = progress.Nop{}
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	opts.OnEvent = emitter(opts.OnEvent)
	if opts.Conversation != "" {
		if _, err := store.EncodeSegment(opts.Conversation); err != nil {
			return nil, fmt.Errorf("conversation id: %w", err)
		}
	}
	switch {
	case into != nil && opts.Conversation == "" && !opts.Force:
		return nil, notEmpty(opts.Target)
	case into != nil:
		return restore(ctx, r, into, opts)
	}
	free, err := CheckTarget(opts.Target)
	if err != nil {
		return nil, err
	}
	if !free {
		// A restore killed after its rename left its staging beside the
		// target it filled: the refusal is the only restore that comes.
		sweepStagings(opts, false)
		return nil, notEmpty(opts.Target)
	}
	return restore(ctx, r, nil, opts)
}

func notEmpty(target string) error {
	return fmt.Errorf("%s: %w (use --force to move the store there aside and restore in its place)", target, ErrTargetNotEmpty)
}

// CheckTarget reports whether dir is free for a new store: missing or
// empty. A non-directory (or a link) is a *NotDirError.
func CheckTarget(dir string) (free bool, err error) {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return true, nil
	case err != nil:
		return false, err
	case !fi.IsDir():
		return false, &NotDirError{Path: dir, Link: fi.Mode()&os.ModeSymlink != 0}
	}
	ents, err := os.ReadDir(dir)
	return err == nil && len(ents) == 0, err
}

// NotDirError refuses a target that is not a directory.
type NotDirError struct {
	Path string
	Link bool // a symbolic link
}

func (e *NotDirError) Error() string {
	if e.Link {
		return e.Path + " is a symbolic link: restore never follows links; name the directory itself"
	}
	return e.Path + " exists and is not a directory"
}

// restore is Restore once the target is checked: opts.Conversation's
// closure into old, or the archive whole in place of old or the free target.
func restore(ctx context.Context, r io.Reader, old *store.Store, opts RestoreOptions) (*RestoreResult, error) {
	into := old != nil && opts.Conversation != ""
	target, parent := opts.Target, filepath.Dir(opts.Target)
	spaceName, reportAs := parent, target
	if into {
		spaceName, reportAs = target, ""
	} else if err := durable.MkdirAll(parent); err != nil {
		return nil, err
	}
	staging, err := archive.NewStaging(sweepStagings(opts, into))
	if err != nil {
		return nil, err
	}
	defer staging.Remove()
	stage := staging.Tree()
	vo := VerifyOptions{Archive: opts.Archive, Limits: opts.Limits, Jobs: opts.Jobs, Progress: opts.Progress, OnEvent: opts.OnEvent,
		spaceName: spaceName, reportAs: reportAs}
	vr, err := verifyInto(ctx, r, stage, vo, true, opts.Conversation == "")
	if err != nil {
		return nil, err
	}
	res := &RestoreResult{SchemaVersion: contract.Version, Archive: opts.Archive, Target: target, Verify: vr, Conversations: []string{}, Kept: []string{}}
	if !vr.OK {
		return res, &MismatchError{Result: vr}
	}
	if err := os.Remove(filepath.Join(stage, archive.ManifestName)); err != nil {
		return nil, err
	}
	staged, err := store.Open(ctx, stage, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "convkit restore"},
		Create: store.CreateAlways})
	if err != nil {
		return nil, err
	}
	defer staged.Close()
	var closure []string
	if opts.Conversation != "" {
		if opts.Conversation, closure, err = closureIn(staged, opts.Conversation); err != nil {
			return nil, err
		}
	}
	if into {
		if err := placeClosure(old, staged, closure, opts, res); err != nil {
			return nil, err
		}
		if res.Reindex, err = reindex.Run(ctx, old, reindex.Options{Jobs: opts.Jobs, OnEvent: opts.OnEvent}); err != nil {
			return nil, err
		}
		res.restoredInvalid()
		return res, nil
	}
	if opts.Conversation != "" {
		res.Conversations = closure
		if err := pruneTo(staged, closure); err != nil {
			return nil, err
		}
		if res.Reindex, err = reindex.Run(ctx, staged, reindex.Options{Jobs: opts.Jobs, OnEvent: opts.OnEvent, ReportAs: target}); err != nil {
			return nil, err
		}
	} else {
		res.Conversations = append(res.Conversations, vr.conversations...)
		res.Reindex = vr.rebuild
	}
	if err := durable.SyncDir(stage); err != nil {
		return nil, err
	}
	if old != nil {
		if res.MovedAside, err = old.ReplaceWith(stage); err != nil {
			return nil, err
		}
	} else if err := os.Rename(stage, target); err != nil {
		// rename(2) replaces an empty directory in one step; a target
		// made non-empty meanwhile stays as it is.
		if rerr := os.Remove(target); rerr != nil {
			return nil, fmt.Errorf("put the restored store in place: %w", err)
		}
		if err := os.Rename(stage, target); err != nil {
			return nil, fmt.Errorf("put the restored store in place: %w", err)
		}
	}
	res.restoredInvalid()
	return res, durable.SyncDir(parent)
}

// placeClosure puts the conversations of closure from staged into s: a
// conversation there is refused without Force, unless it is the archived
// one byte for byte (a killed restore put it there); ancestors there are kept.
func placeClosure(s, staged *store.Store, closure []string, opts RestoreOptions, res *RestoreResult) error {
	dst, err := s.ConversationPath(opts.Conversation)
	if err != nil {
		return err
	}
	same := false
	if _, err := os.Lstat(dst); err == nil {
		from, _ := staged.ConversationPath(opts.Conversation)
		if same, err = sameTree(from, dst); err != nil {
			return err
		}
		if !same && !opts.Force {
			return fmt.Errorf("conversation %s (%s): %w (use --force to move it aside and restore the archived one)",
				termtext.Quote(opts.Conversation), dst, ErrConversationExists)
		}
	}
	for _, id := range closure {
		from, _ := staged.ConversationPath(id)
		to, _ := s.ConversationPath(id)
		_, err := os.Lstat(to)
		switch {
		case err == nil && id != opts.Conversation:
			res.Kept = append(res.Kept, id)
			continue
		case err == nil && same: // already restored, as archived
		default:
			aside, err := s.PlaceConversation(id, from)
			if err != nil {
				return err
			}
			res.MovedAside = cmp.Or(aside, res.MovedAside)
		}
		res.Conversations = append(res.Conversations, id)
	}
	return durable.SyncDir(s.ConversationsDir())
}

// sameTree reports whether a and b hold the same regular files with the
// same bytes, and nothing else.
func sameTree(a, b string) (bool, error) {
	ea, err := os.ReadDir(a)
	if err != nil {
		return false, err
	}
	eb, err := os.ReadDir(b)
	if err != nil {
		return false, err
	}
	if len(ea) != len(eb) {
		return false, nil
	}
	for i := range ea {
		if ea[i].Name() != eb[i].Name() || !ea[i].Type().IsRegular() || !eb[i].Type().IsRegular() {
			return false, nil
		}
		da, err := fileDigest(filepath.Join(a, ea[i].Name()))
		if err != nil {
			return false, err
		}
		if db, err := fileDigest(filepath.Join(b, eb[i].Name())); err != nil || da != db {
			return false, err
		}
	}
	return true, nil
}

func fileDigest(p string) (sum [sha256.Size]byte, err error) {
	f, err := durable.OpenRegular(p, os.O_RDONLY)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum, err
	}
	return [sha256.Size]byte(h.Sum(nil)), nil
}

// closureIn is the conversation and its fork ancestors in s.
func closureIn(s *store.Store, ref string) (string, []string, error) {
	ids, err := s.ResolveIDs([]string{ref})
	if err != nil {
		return "", nil, fmt.Errorf("in the archive: %w", err)
	}
	id := ids[0]
	p, err := s.ConversationPath(id)
	if err != nil {
		return "", nil, err
	}
	if _, err := os.Lstat(p); err != nil {
		return "", nil, fmt.Errorf("conversation %s: %w (or it was being deleted when the backup was taken)", termtext.Quote(id), ErrNotInArchive)
	}
	ids, err = s.DependencyClosure(id)
	if err != nil {
		return "", nil, fmt.Errorf("the fork ancestors of %s in the archive: %w", termtext.Quote(id), err)
	}
	return id, ids, nil
}

func pruneTo(s *store.Store, keep []string) error {
	want := map[string]bool{}
	for _, id := range keep {
		name, err := store.EncodeSegment(id)
		if err != nil {
			return err
		}
		want[name] = true
	}
	root := s.ConversationsDir()
	ents, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !want[e.Name()] {
			if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
				return err
			}
		}
	}
	return durable.SyncDir(root)
}

// sweepStagings removes the stagings killed restores left and says where
// this one's goes: a whole restore's beside the target, to become it by
// rename (an unlocked one swept when an hour old); a conversation's inside
// the store, on its file system, where only a restore holding runtime.lock
// stages, so every unlocked staging is a killed one's.
func sweepStagings(opts RestoreOptions, into bool) (dir, name string) {
	dir, name, age := filepath.Dir(opts.Target), "."+filepath.Base(opts.Target)+".restore", archive.UnlockedStagingAge
	if into {
		dir, name, age = opts.Target, ".restore", 0
	}
	const left = "left by an interrupted restore"
	for _, s := range archive.SweepStaging(dir, name, nil, age) {
		switch {
		case s.Err != nil:
			fmt.Fprintf(opts.Log, "could not remove %s: %v\n", s.Path, s.Err)
		case into:
			opts.OnEvent(store.Item{Kind: store.ItemTempRemoved, Path: s.Path, Reason: left})
		default:
			fmt.Fprintf(opts.Log, "REMOVED %s: %s\n", s.Path, left)
		}
	}
	return dir, name
}
