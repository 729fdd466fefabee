// Command genlog writes one large session log for benchmarks:
//
//	go run ./scripts/genlog -version 3 -size 256MiB -zstd /tmp/big.v3.jsonl.zst
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
	size := flag.String("size", "64MiB", "plain size: bytes, or with KiB, MiB, GiB")
	compress := flag.Bool("zstd", false, "compress (the file name must end in .zst)")
	seed := flag.Int64("seed", 1, "generator seed")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: genlog [-version N] [-size SIZE] [-zstd] PATH")
		os.Exit(2)
	}
	n, err := parseSize(*size)
	if err != nil {
		fmt.Fprintln(os.Stderr, "genlog:", err)
		os.Exit(2)
	}
	c := convlog.Plain
	if *compress {
		c = convlog.Zstd
	}
	if err := fixtures.LargeLog(flag.Arg(0), *version, c, n, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "genlog:", err)
		os.Exit(1)
	}
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suffix) {
			s, mult = strings.TrimSuffix(s, suffix), m
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return v * mult, nil
}
