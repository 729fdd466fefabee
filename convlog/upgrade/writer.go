package upgrade

import (
	"fmt"

	"github.com/convkit/convkit/convlog"
)

// OpenAppend opens a log for appending as the runtime's next write does: an
// older log is first upgraded and its successor published beside the original
// (Publish), and the writer appends to the successor. Reads only upgrade in
// memory.
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
