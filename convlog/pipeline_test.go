package convlog

import (
	"runtime"
	"testing"
)

// TestPipeline checks which fast paths a reader takes for each kind of
// log, memory option and core count.
func TestPipeline(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(procs) })
	big := int64(prefetchMinFile)
	cases := []struct {
		name  string
		procs int
		opts  ReaderOptions
		comp  Compression
		size  int64
		want  pipeline
	}{
		{"large zstd log", 2, ReaderOptions{}, Zstd, big, pipeline{prefetch: true, decoders: 2, wholeBytes: prefetchFrameBytes, checkAhead: true, streamAhead: true}},
		{"large zstd log, more cores", 8, ReaderOptions{}, Zstd, big, pipeline{prefetch: true, decoders: prefetchDecoders, wholeBytes: prefetchFrameBytes, checkAhead: true, streamAhead: true}},
		{"large zstd log, low memory", 2, ReaderOptions{LowMemory: true}, Zstd, big, pipeline{prefetch: true, decoders: 1, wholeBytes: smallFrameBytes, streamAhead: true, lowMemory: true}},
		{"small zstd log", 2, ReaderOptions{}, Zstd, big - 1, pipeline{streamAhead: true, wholeBytes: smallFrameBytes}},
		{"plain log", 2, ReaderOptions{}, Plain, 1 << 30, pipeline{streamAhead: true, wholeBytes: smallFrameBytes}},
		{"one core", 1, ReaderOptions{}, Zstd, 1 << 30, pipeline{wholeBytes: smallFrameBytes}},
		{"one core, low memory", 1, ReaderOptions{LowMemory: true}, Zstd, 1 << 30, pipeline{lowMemory: true, wholeBytes: smallFrameBytes}},
	}
	for _, tc := range cases {
		runtime.GOMAXPROCS(tc.procs)
		if got := newPipeline(tc.opts, tc.comp, tc.size); got != tc.want {
			t.Errorf("%s: pipeline %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
