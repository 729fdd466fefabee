package rawjson

// stringRun returns the offset, from b[i] in a string's body, of the first
// byte a string scan must look at: '"', a backslash that does not begin a
// two-byte escape ('\"', '\\', '\/', '\b', '\f', '\n', '\r', '\t': passed
// over), a control character or a byte from 0x80 on. Near the end of b it
// may return an offset before such a byte, or len(b); the caller's byte
// loop goes on from there. With AVX2 (strrun_amd64.s) it scans 32 or 64
// bytes a turn and passes over the escapes itself; without, plainRun's
// words of eight bytes stop at every escape. The two find the same bytes:
// FuzzStringRun.
func stringRun(b []byte, i int) int {
	if hasAVX2 && len(b)-i >= 32 {
		if i = stringRunAVX2(b, i); len(b)-i >= 32 {
			return i
		}
	}
	return plainRun(b, i)
}
