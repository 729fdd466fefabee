package reindex

// SetBetweenReadings sets what Check runs between its two readings and
// returns the undo.
func SetBetweenReadings(f func()) func() {
	prev := betweenReadings
	betweenReadings = f
	return func() { betweenReadings = prev }
}
