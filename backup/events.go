package backup

import "github.com/convkit/convkit/store"

// emitter hands what a backup, a verification or a restore reports as it
// goes to fn, or drops it when fn is nil.
func emitter(fn func(store.Item)) func(store.Item) {
	if fn == nil {
		return func(store.Item) {}
	}
	return fn
}
