package upgrade

// EncodeSlots is how many frames are compressed at once, for the memory
// test outside the package.
func EncodeSlots() int { return cap(encoders) }

// SetTamper arms the stage writer's test hooks (see linesTampered,
// frameTampered, stageWritten), for the verification test outside the
// package; restore disarms them.
func SetTamper(lines func(plain []byte, events *int64), frame func(out []byte, header bool), written func(path string)) (restore func()) {
	if lines != nil {
		linesTampered = func(j *frameJob) { lines(j.plain, &j.events) }
	}
	if frame != nil {
		frameTampered = func(j *frameJob) { frame(j.out, j.header) }
	}
	stageWritten = written
	return func() { linesTampered, frameTampered, stageWritten = nil, nil, nil }
}

// Publish stages and publishes the successor of src, as OpenAppend does.
func Publish(src string, opts PublishOptions) (dst string, err error) {
	s, err := Stage(src, opts)
	if err != nil {
		return "", err
	}
	return s.Publish()
}
