package upgrade

// SetTamper arms the stage writer's test hooks (see linesTampered and
// stageWritten), for the verification test outside the package; restore
// disarms them.
func SetTamper(lines func(plain []byte, events *int64), written func(path string)) (restore func()) {
	if lines != nil {
		linesTampered = func(plain []byte, j *lineChunk) { lines(plain, &j.events) }
	}
	stageWritten = written
	return func() { linesTampered, stageWritten = nil, nil }
}

// Publish stages and publishes the successor of src, as OpenAppend does.
func Publish(src string, opts PublishOptions) (dst string, err error) {
	s, err := Stage(src, opts)
	if err != nil {
		return "", err
	}
	return s.Publish()
}
