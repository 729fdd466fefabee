// Package upgrade reads logs of format versions 0–3 and yields version 4
// events, upgrading in memory one step at a time (v0→v1→v2→v3→v4), and
// publishes a version 4 successor beside the untouched original (Publish).
//
// Open (or FromReader) gives a Reader whose Events are version 4 events,
// whatever the log's version. Stage writes and checks a successor in a
// temporary file, then Staged.Publish puts it in place; OpenAppend does
// both before appending, as the runtime does.
//
// Each step is a stateful stage that renames, inserts, drops or folds events,
// renumbers seqs densely and remaps the references the format declares. Only
// the members a rule reads are decoded, as ordered raw members, so key order
// and untouched bytes survive. Memory does not grow with the log, apart from
// the v1→v2 look-ahead (one step of one turn) and the per-insertion seq maps;
// docs/UPGRADE.md states exactly which rules are implemented.
package upgrade
