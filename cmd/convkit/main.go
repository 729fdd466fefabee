package main

import (
	_ "github.com/gofrs/flock"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/rogpeppe/go-internal/testscript"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/urfave/cli/v2"
	_ "modernc.org/sqlite"
)

func main() {}
