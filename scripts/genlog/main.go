// Command genlog writes one large session log for benchmarks, of either
// kind of line the benchmarks measure:
//
//	go run ./scripts/genlog -lines long -version 3 -size 256MiB -zstd /tmp/big.v3.jsonl.zst
//	go run ./scripts/genlog -lines short -version 3 -size 200MB /tmp/chat.v3.jsonl
//	go run ./scripts/genlog -id large -size 64MiB -zstd DIR/conversations/c/large.v3.jsonl.zst
//	go run ./scripts/genlog -lines mixed -size 200MB -zstd -frames one /tmp/one.v3.jsonl.zst
//
// -lines long: tool outputs of 1–3 MiB and base64 screenshots, each one
// line, every seventh turn (most bytes are in lines over 1 MiB); -lines
// short: a text chat with tools, many short events and messages, no line
// over 64 KiB; -lines mixed: the short kind's turns and now and then a
// tool output of 16–512 KiB or a screenshot of up to 1 MiB. -frames one
// compresses the log as `zstd FILE` does, in one frame (default: the
// writer's frames). -id names the session in the header: a store's reader
// refuses a session log whose header names another session than its
// file name (large.v3.jsonl is session "large").
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
)

func main() {
	version := flag.Int("version", 3, "format version of the log (0-4)")
	size := flag.String("size", "64MiB", "plain size: bytes, or with KB, MB, GB, KiB, MiB, GiB")
	lines := flag.String("lines", "long", "kind of lines: long (multi-megabyte tool outputs), short (a text chat) or mixed")
	compress := flag.Bool("zstd", false, "compress (the file name must end in .zst)")
	frames := flag.String("frames", "writer", "with -zstd: the writer's frames, or one frame as the zstd tool writes it")
	seed := flag.Int64("seed", 1, "generator seed")
	id := flag.String("id", "", "the session `ID` the header names (default: large- and 8 hex digits)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: genlog [-lines long|short|mixed] [-version N] [-size SIZE] [-zstd [-frames writer|one]] PATH")
		os.Exit(2)
	}
	n, err := parseSize(*size)
	if err != nil {
		fmt.Fprintln(os.Stderr, "genlog:", err)
		os.Exit(2)
	}
	kind, err := fixtures.ParseLineKind(*lines)
	if err != nil {
		fmt.Fprintln(os.Stderr, "genlog:", err)
		os.Exit(2)
	}
	if *frames != "writer" && (*frames != "one" || !*compress) {
		fmt.Fprintln(os.Stderr, "genlog: -frames: want writer, or one with -zstd")
		os.Exit(2)
	}
	c := convlog.Plain
	if *compress {
		c = convlog.Zstd
	}
	write := fixtures.LargeLogOf
	if *frames == "one" {
		write = func(path, id string, version int, _ convlog.Compression, kind fixtures.LineKind, n, seed int64) error {
			return fixtures.LargeLogOneFrame(path, id, version, kind, n, seed)
		}
	}
	if err := write(flag.Arg(0), *id, *version, c, kind, n, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "genlog:", err)
		os.Exit(1)
	}
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.m
			break
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return v * mult, nil
}
