package upgrade

import (
	"fmt"

	"github.com/convkit/convkit/convlog"
)

// OpenAppend opens a log for appending the way the runtime does on its next
// write: a log older than the current version is first upgraded and its
// version 4 successor published beside the untouched original (Publish);
// the writer then appends to the successor. A current log is opened
// directly. A read never does this: Open upgrades in memory only.
func OpenAppend(path string, opts PublishOptions, wopts convlog.WriterOptions) (w *convlog.Writer, current string, err error) {
	r, err := convlog.Open(path, convlog.ReaderOptions{MaxLineBytes: opts.MaxLineBytes})
	if err != nil {
		return nil, "", err
	}
	version := r.Header().Version
	r.Close()
	current = path
	if version < convlog.CurrentVersion {
		if current, err = Publish(path, opts); err != nil {
			return nil, "", fmt.Errorf("upgrading %s before writing: %w", path, err)
		}
	}
	w, err = convlog.OpenAppend(current, wopts)
	if err != nil {
		return nil, "", err
	}
	return w, current, nil
}
