package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/convkit/convkit/internal/durable"
)

// ReplacedDirName is the directory of the data directory where
// PlaceConversation keeps the conversations it moved aside.
const ReplacedDirName = "replaced"

// asideTime names what is moved aside (UTC).
const asideTime = "20060102T150405Z"

// PlaceConversation moves from, a conversation directory staged on the
// store's file system, into the store as convID, moving what is there aside
// whole to <data-dir>/replaced/<name>-<UTC time>[-N] (aside; "": nothing),
// or back when the rename fails. A new conversation's rename is made durable
// by the caller's next sync of conversations/.
func (s *Store) PlaceConversation(convID, from string) (aside string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return "", err
	}
	to, err := conversationPath(s.dataDir, convID)
	if err != nil {
		return "", err
	}
	s.closeConversation(convID)
	if err := durable.MkdirAll(filepath.Dir(to)); err != nil {
		return "", err
	}
	if _, err := os.Lstat(to); err == nil {
		replaced := filepath.Join(s.dataDir, ReplacedDirName)
		if err := durable.MkdirAll(replaced); err != nil {
			return "", err
		}
		if aside, err = freeName(filepath.Join(replaced, filepath.Base(to)+"-"+s.now().UTC().Format(asideTime))); err != nil {
			return "", err
		}
		if err := os.Rename(to, aside); err != nil {
			return "", fmt.Errorf("move %s aside: %w", to, err)
		}
		if err := durable.SyncDir(replaced); err != nil {
			return "", err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.Rename(from, to); err != nil {
		if aside != "" {
			if berr := os.Rename(aside, to); berr != nil {
				return "", fmt.Errorf("put %s in place: %w; the store's copy is at %s", to, err, aside)
			}
		}
		return "", fmt.Errorf("put %s in place: %w", to, err)
	}
	if aside == "" {
		return "", nil
	}
	return aside, durable.SyncDir(filepath.Dir(to))
}

// ReplaceWith moves the data directory aside whole, to
// <data-dir>.replaced-<UTC time>[-N], and renames dir, a store staged on the
// same file system, into its place, or puts the old one back. The lock goes
// aside with it: Close the handle after.
func (s *Store) ReplaceWith(dir string) (aside string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return "", err
	}
	if aside, err = freeName(s.dataDir + ".replaced-" + s.now().UTC().Format(asideTime)); err != nil {
		return "", err
	}
	if err := os.Rename(s.dataDir, aside); err != nil {
		return "", fmt.Errorf("move the old store aside: %w", err)
	}
	if err := os.Rename(dir, s.dataDir); err != nil {
		if berr := os.Rename(aside, s.dataDir); berr != nil {
			return "", fmt.Errorf("put the restored store in place: %w; the old store is at %s and the restored one at %s", err, aside, dir)
		}
		return "", fmt.Errorf("put the restored store in place: %w (the old store is back)", err)
	}
	return aside, durable.SyncDir(filepath.Dir(s.dataDir))
}

// freeName is p, or p-2, p-3, ... whichever does not exist.
func freeName(p string) (string, error) {
	for i := 1; i < 1000; i++ {
		q := p
		if i > 1 {
			q = p + "-" + strconv.Itoa(i)
		}
		if _, err := os.Lstat(q); errors.Is(err, fs.ErrNotExist) {
			return q, nil
		}
	}
	return "", fmt.Errorf("%s: no free name", p)
}
