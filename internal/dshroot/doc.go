// Package dshroot is a sessions root in the layout of the runtime the log
// format comes from (DSH):
//
//	<root>/<project-dir>/<session-dir>/session[.vN].jsonl[.zstd]
//
// It owns that layout's rules: the names of project directories (built from
// the header's working directory), of session directories (the session id,
// escaped) and of generation files; which generation is current; the check
// that a log's header names the place it sits in; what breaks the layout
// (flat files, symbolic links, a root that mixes compressions, one session
// id in two project directories); the per-session lock (session.lock); and
// where a session's subagent children are (anywhere under the root).
//
// It is not convkit's store (package store): such a root has no
// runtime.lock, no metadata.db and no conversation logs, and it is locked
// one session at a time. It lives outside store so that neither layout's
// rules leak into the other, and outside internal/ so that a runtime can
// read and lock such a root with the same code as convkit migrate. Open is
// the door to a root: it takes no lock and creates nothing; the only file
// this package ever creates is a session directory's session.lock, when a
// session is locked.
package dshroot
