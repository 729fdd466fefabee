package backup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/internal/durable"
)

// A backup run can leave what a monitoring system needs in a file in the
// Prometheus text format, for node_exporter's textfile collector: when the
// last archive was completed, how long the run took, how big the archive
// was, and what it left out or found invalid. The file is replaced
// atomically, after every run, good or bad.

// MetricsMode is the metrics file's mode: node_exporter reads it as its
// own user, and it holds counts and times only.
const MetricsMode = 0o644

// maxMetricsBytes bounds what is read of an earlier metrics file.
const maxMetricsBytes = 64 << 10

// MetricsRun is one backup run, for WriteMetrics.
type MetricsRun struct {
	// End is when the run ended; Duration how long it took.
	End      time.Time
	Duration time.Duration
	// ExitCode is the run's exit status.
	ExitCode int
	// Result is the backup written: nil when the run wrote no complete
	// archive (the figures of the last one that did are then kept from
	// the earlier file).
	Result *Result
}

// metric is one metric of the file: its name, help and, for the last
// complete archive, its value from a Result.
type metric struct {
	name, help string
	// ofResult gives the value from the run's result; nil for the
	// metrics of the run itself.
	ofResult func(r *Result) float64
}

// Metric names.
const (
	MetricLastSuccess = "convkit_backup_last_success_timestamp_seconds"
	MetricLastRun     = "convkit_backup_last_run_timestamp_seconds"
	MetricExitCode    = "convkit_backup_last_run_exit_code"
	MetricDuration    = "convkit_backup_duration_seconds"
)

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// metrics are the file's metrics, in its order.
var metrics = []metric{
	{MetricLastSuccess, "When the last run that wrote a complete archive ended (Unix seconds; 0: none yet). Exit 3 counts: the archive is complete, the problems have metrics of their own.", nil},
	{MetricLastRun, "When the last run ended (Unix seconds), whatever its outcome.", nil},
	{MetricExitCode, "The last run's exit status (0 success, 1 failure, 3 complete but a file left out or a log invalid, 130 interrupted).", nil},
	{MetricDuration, "How long the last run took, in seconds.", nil},
	{"convkit_backup_archive_bytes", "The last complete archive's size in bytes.", func(r *Result) float64 { return float64(r.Bytes) }},
	{"convkit_backup_conversations", "Conversations in the last complete archive.", func(r *Result) float64 { return float64(r.Manifest.Counts.Conversations) }},
	{"convkit_backup_files", "Files in the last complete archive (logs and the index).", func(r *Result) float64 { return float64(r.Manifest.Counts.Files) }},
	{"convkit_backup_bytes", "Bytes of the store's files in the last complete archive.", func(r *Result) float64 { return float64(r.Manifest.Counts.Bytes) }},
	{"convkit_backup_invalid_logs", "Logs of the last complete archive that failed their check (archived whole); see convkit_backup_strict.", func(r *Result) float64 { return float64(r.Manifest.Counts.InvalidLogs) }},
	{"convkit_backup_strict", "1 when the last complete archive's logs were read event by event (--strict), 0 when by their structure only: invalid_logs then counts broken framing, not content.", func(r *Result) float64 { return boolValue(r.Manifest.LogCheck == LogCheckStrict) }},
	{"convkit_backup_unreadable_files", "Files of the store left out of the last complete archive because they could not be read.", func(r *Result) float64 { return float64(len(r.Manifest.Problems)) }},
	{"convkit_backup_online", "1 when the last complete archive was taken while another process held runtime.lock.", func(r *Result) float64 { return boolValue(r.Manifest.Online) }},
}

// WriteMetrics writes the metrics of run to path, replacing the file
// atomically (a temporary file beside it, fsynced, renamed over it, the
// directory fsynced; never writing through a link). When run wrote no
// complete archive, the figures of the last one that did, and its time,
// are kept from the file path held (0 when it held none).
func WriteMetrics(path string, run MetricsRun) error {
	values := map[string]float64{}
	if run.Result == nil {
		prev, err := readMetrics(path)
		if err != nil {
			return err
		}
		for _, m := range metrics {
			if m.ofResult != nil || m.name == MetricLastSuccess {
				values[m.name] = prev[m.name]
			}
		}
	} else {
		values[MetricLastSuccess] = float64(run.End.Unix())
		for _, m := range metrics {
			if m.ofResult != nil {
				values[m.name] = m.ofResult(run.Result)
			}
		}
	}
	values[MetricLastRun] = float64(run.End.Unix())
	values[MetricExitCode] = float64(run.ExitCode)
	values[MetricDuration] = run.Duration.Seconds()

	var b bytes.Buffer
	for _, m := range metrics {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s %s\n", m.name, m.help, m.name, m.name,
			strconv.FormatFloat(values[m.name], 'f', -1, 64))
	}
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s: is a directory", path)
	}
	return publishSmall(path, b.Bytes(), MetricsMode, false)
}

// readMetrics reads the values of an earlier metrics file at path (none
// when there is no file). It never follows a link and reads at most
// maxMetricsBytes; a line it does not know is passed over.
func readMetrics(path string) (map[string]float64, error) {
	values := map[string]float64{}
	f, err := durable.OpenRegular(path, os.O_RDONLY)
	if errors.Is(err, fs.ErrNotExist) {
		return values, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxMetricsBytes))
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		if x, err := strconv.ParseFloat(v, 64); err == nil {
			values[name] = x
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return values, nil
}

// publishSmall replaces the file at path with data, mode perm whatever the
// umask, by a temporary file beside it, fsynced and renamed over it, so a
// link at path is replaced, never written through. With lock the temporary
// is flocked while written, so a backup sweeping killed writers' leaves it.
func publishSmall(path string, data []byte, perm fs.FileMode, lock bool) error {
	dir := filepath.Dir(path)
	tmp, err := durable.CreateTemp(dir, "."+filepath.Base(path))
	if err != nil {
		return err
	}
	name := tmp.Name()
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(name)
		}
	}()
	if lock {
		held, err := archive.LockTemp(tmp)
		if err != nil {
			return err
		}
		defer held.Close()
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("publish %s: %w", path, err)
	}
	done = true
	return durable.SyncDir(dir)
}
