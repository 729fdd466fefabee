package termtext

import (
	"io/fs"
	"os"
	"strings"
)

// Text is err's message with each file named once. A system call's error
// names its file ("write F: no space left on device"), and the callers
// that wrap it often name the file too ("write F: write F: no space left
// on device"): a *fs.PathError or *os.LinkError whose file the message
// names before it loses its own mention ("write F: write: no space left
// on device"). It works on err's chain, never on the text alone, so it
// cannot change what a message quotes.
func Text(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	var visit func(error)
	visit = func(e error) {
		for e != nil {
			var full, short string
			var paths []string
			switch pe := e.(type) {
			case *fs.PathError:
				full, short, paths = pe.Error(), pe.Op+": "+pe.Err.Error(), []string{pe.Path}
			case *os.LinkError:
				full, short, paths = pe.Error(), pe.Op+": "+pe.Err.Error(), []string{pe.Old, pe.New}
			}
			if full != "" {
				if i := strings.LastIndex(msg, full); i > 0 {
					before := msg[:i]
					named := true
					for _, p := range paths {
						named = named && p != "" && strings.Contains(before, p)
					}
					if named {
						msg = before + short + msg[i+len(full):]
					}
				}
			}
			switch u := e.(type) {
			case interface{ Unwrap() []error }:
				for _, inner := range u.Unwrap() {
					visit(inner)
				}
				return
			case interface{ Unwrap() error }:
				e = u.Unwrap()
			default:
				return
			}
		}
	}
	visit(err)
	return msg
}

// Reason is err's message (as Text words it) as a reason about the file at
// path, for a line or a record that names path already ("SKIPPED <path>:
// <reason>", a failure with its path): the message's first mention of
// path goes. A leading "<path>: " or `"<path>": ` (as a format error and
// the errors that wrap one begin) is dropped; a mention inside the message
// (`open <path>: …`, `corrupt session log "<path>": …`, `sessions root
// <path> is not a directory`) is cut out with the space before it. Other
// files the message names (a child log, a temporary file) stay.
func Reason(path string, err error) string {
	msg := Text(err)
	if path == "" {
		return msg
	}
	for _, lead := range []string{path + ": ", `"` + path + `": `} {
		if strings.HasPrefix(msg, lead) {
			return msg[len(lead):]
		}
	}
	for _, mention := range []string{` "` + path + `"`, " " + path} {
		for from := 0; ; {
			i := strings.Index(msg[from:], mention)
			if i < 0 {
				break
			}
			i += from
			end := i + len(mention)
			// A whole mention: the path ends there (not a longer path
			// that begins with it).
			if end == len(msg) || strings.ContainsRune(":) ,;", rune(msg[end])) {
				return msg[:i] + msg[end:]
			}
			from = end
		}
	}
	return msg
}
