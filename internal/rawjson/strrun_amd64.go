//go:build !purego

package rawjson

import "golang.org/x/sys/cpu"

// hasAVX2: stringRun uses stringRunAVX2 (strrun_amd64.s).
var hasAVX2 = cpu.X86.HasAVX2

//go:noescape
func stringRunAVX2(b []byte, i int) int
