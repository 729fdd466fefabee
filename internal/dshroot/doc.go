// Package dshroot is a sessions root in the layout of the runtime the log
// format comes from (DSH):
//
//	<root>/<project-dir>/<session-dir>/session[.vN].jsonl[.zstd]
//
// It owns that layout's rules: the names of project directories, session
// directories and generations, which generation is current, the check that a
// header names its place, what breaks the layout, the per-session
// session.lock, and where a session's subagent children are.
//
// It is not convkit's store: such a root has no runtime.lock and is locked one
// session at a time. It lives outside store so neither layout's rules leak
// into the other, and outside internal/ so a runtime can use it. Open takes no
// lock and creates nothing; the only file this package creates is
// session.lock.
package dshroot
