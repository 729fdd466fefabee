// Package upgrade reads logs of format versions 0–3 and yields version 4
// events, upgrading in memory one step at a time (v0→v1→v2→v3→v4); nothing
// is written. It also publishes a version 4 successor beside the untouched
// original (Publish).
//
// Each step is a stateful stage: it receives one event at a time in its
// source version's coordinates and emits events in its target version's
// coordinates, inserting, renaming, dropping or folding events, renumbering
// seqs densely and remapping the references the format declares. Only the
// events a rule touches are decoded, and of those only the members the rule
// reads: JSON objects are handled as ordered lists of raw members, so key
// order and untouched bytes survive, and re-encoding is compact without HTML
// escaping. Memory does not grow with the log's length, except for the
// bounded look-ahead of the v1→v2 step (one step of one turn) and the
// per-insertion seq maps documented in docs/UPGRADE.md, which states exactly
// which rules are implemented.
package upgrade
