// Package dshroot is a sessions root in the layout of the runtime the log
// format comes from (DSH):
//
//	<root>/<project-dir>/<session-dir>/session[.vN].jsonl[.zstd]
//
// It owns that layout's rules: the names of project directories, session
// directories and generations, which generation is current, the check that a
// header names its place, what breaks the layout, the per-session
// session.lock, and where a session's subagent children are. Such a root has
// no runtime.lock and is locked one session at a time; Open takes no lock and
// creates nothing, and session.lock is the only file this package creates.
package dshroot
