package cli

import (
	"encoding/json"
	"io"
)

// schemaVersion is the version of the JSON documents convkit prints
// (docs/JSON.md). It changes only when a field changes meaning or goes away;
// new fields do not change it.
const schemaVersion = 1

// writeJSON writes v as one line of JSON. HTML characters are not escaped:
// the output is for programs, not browsers.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
