//go:build !amd64 || purego

package rawjson

var hasAVX2 = false

func stringRunAVX2(b []byte, i int) int { panic("rawjson: no AVX2 kernel in this build") }
