package convlog

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/convkit/convkit/internal/rawjson"
	"github.com/convkit/convkit/internal/termtext"
)

// CurrentVersion is the log format version this build writes.
const CurrentVersion = 4

// Header types: the first line names which kind of log follows.
const (
	SessionLog      = "session"      // one agent session's history
	ConversationLog = "conversation" // a conversation's own log: sessions, turns, renames, forks, deletes
)

// Header is a log's first line.
type Header struct {
	Type      string
	Version   int
	ID        string
	CreatedAt int64 // Unix milliseconds
	// Session headers only; empty strings are absent fields.
	Cwd             string
	ParentSession   string
	IsSeeded        bool   // v2 and later
	SeedLength      *int64 // v0 and v1: the inherited event count
	Origin          string // "" or "subagent"
	DelegationDepth int64
	AgentPreset     string

	// Raw is the header line as read (without its newline); nil for a header
	// built in memory. Writers copy it verbatim when set.
	Raw []byte
}

// parseHeader parses and validates a header line. wantVersion is the
// version the file name carries, or -1 when unknown. The members are found
// in scratch's array: the JSON check's recursion makes any array it is
// given escape, so a reader lends its own rather than allocate one per log.
func parseHeader(line []byte, wantVersion int, scratch []member) (*Header, *lineProblem) {
	if bytes.HasPrefix(line, []byte("\xEF\xBB\xBF")) {
		// Not white space to JSON.parse either.
		return nil, corrupt(0, "header line starts with a UTF-8 byte order mark (EF BB BF)")
	}
	members, err := rawjson.Object(line, scratch[:0])
	if err != nil {
		se := err.(*rawjson.SyntaxError)
		if se.Msg == "not a JSON object" && len(bytes.TrimSpace(line)) > 0 && line[rawjson.SkipSpace(line, 0)] != '{' {
			if rawjson.Valid(line) == nil {
				return nil, corrupt(se.Offset, "first line is not a JSON object")
			}
		}
		return nil, corrupt(se.Offset, "header line is not valid JSON: %s", se.Msg)
	}
	h := &Header{Raw: line, Version: -1}
	get := func(k string) *member {
		for i := range members {
			if string(members[i].Key) == k {
				return &members[i]
			}
		}
		return nil
	}
	t := get("type")
	if t == nil {
		return nil, corrupt(0, "first line is not a log header: it has no \"type\"")
	}
	typ, ok := rawjson.String(t.Value)
	if !ok || (typ != SessionLog && typ != ConversationLog) {
		return nil, corrupt(t.ValOff, "first line is not a log header: type must be %s or %s", termtext.Quote(SessionLog), termtext.Quote(ConversationLog))
	}
	h.Type = typ
	v := get("version")
	if v == nil {
		return nil, corrupt(0, "header has no \"version\"")
	}
	ver, ok := rawjson.Int(v.Value)
	if !ok || ver < 0 {
		return nil, corrupt(v.ValOff, "header version is not a non-negative safe integer")
	}
	h.Version = int(ver)
	if wantVersion >= 0 && h.Version != wantVersion {
		return nil, corrupt(v.ValOff, "file name identifies v%d, but its header identifies v%d", wantVersion, h.Version)
	}
	if h.Version > CurrentVersion {
		return nil, &lineProblem{col: v.ValOff, kind: ErrUnsupported,
			msg: fmt.Sprintf("log uses format v%d, but this build reads only up to v%d: the log was written by a newer runtime; upgrade convkit to read it", h.Version, CurrentVersion)}
	}
	if h.Type == SessionLog && h.Version <= 1 && (get("sandboxMode") != nil || get("approvalPolicy") != nil) {
		return nil, corrupt(0, "session header uses retired policy baseline fields")
	}
	// The members beyond type and version, checked in this order once no
	// other member is found.
	type field struct {
		key, rule string
		required  bool
		str       *string
		valid     func(string) bool // of a str field
		num       *int64            // a non-negative safe integer
		flag      *bool
	}
	nonEmpty := func(s string) bool { return s != "" }
	fields := append(make([]field, 0, 8),
		field{key: "id", rule: "a non-empty string", required: true, str: &h.ID, valid: nonEmpty},
		field{key: "createdAt", rule: "a non-negative safe integer (Unix milliseconds)", required: true, num: &h.CreatedAt})
	if h.Type == SessionLog {
		fields = append(fields,
			field{key: "cwd", rule: "an absolute path", str: &h.Cwd, valid: func(s string) bool { return strings.HasPrefix(s, "/") }},
			field{key: "parentSession", rule: "a non-empty string", str: &h.ParentSession, valid: nonEmpty},
			field{key: "origin", rule: `"subagent"`, str: &h.Origin, valid: func(s string) bool { return s == "subagent" }},
			field{key: "agentPreset", rule: "a string", str: &h.AgentPreset, valid: func(string) bool { return true }},
			field{key: "delegationDepth", rule: "a non-negative safe integer", required: true, num: &h.DelegationDepth})
		if h.Version <= 1 {
			if get("seedLength") != nil {
				h.SeedLength = new(int64)
			}
			fields = append(fields, field{key: "seedLength", rule: "a non-negative safe integer", num: h.SeedLength})
		} else {
			fields = append(fields, field{key: "isSeeded", rule: "a boolean", required: true, flag: &h.IsSeeded})
		}
	}
	for _, m := range members {
		if k := string(m.Key); k != "type" && k != "version" && !slices.ContainsFunc(fields, func(f field) bool { return f.key == k }) {
			return nil, corrupt(m.KeyOff, "header has unexpected member %s", termtext.Quote(k))
		}
	}
	for _, f := range fields {
		m := get(f.key)
		if m == nil {
			if f.required {
				return nil, corrupt(0, "header has no %q", f.key)
			}
			continue
		}
		var ok bool
		switch {
		case f.num != nil:
			*f.num, ok = rawjson.Int(m.Value)
			ok = ok && *f.num >= 0
		case f.flag != nil:
			*f.flag, ok = string(m.Value) == "true", string(m.Value) == "true" || string(m.Value) == "false"
		default:
			*f.str, ok = rawjson.String(m.Value)
			ok = ok && f.valid(*f.str)
		}
		if !ok {
			return nil, corrupt(m.ValOff, "header %s must be %s", f.key, f.rule)
		}
	}
	return h, nil
}

// ParseHeader parses a header line (without its newline). wantVersion is the
// version the file name carries, or -1 when unknown.
func ParseHeader(path string, line []byte, wantVersion int) (*Header, error) {
	h, p := parseHeader(line, wantVersion, nil)
	if p != nil {
		return nil, &FormatError{Path: path, Pos: Position{Line: 1, Column: int64(p.col) + 1}, Msg: p.msg, Kind: p.kind}
	}
	return h, nil
}

// AppendJSON appends the header line (without newline) in the canonical key
// order: type, version, id, createdAt, cwd, parentSession, isSeeded or
// seedLength, origin, delegationDepth, agentPreset. A header read from a file
// is copied verbatim.
func (h *Header) AppendJSON(dst []byte) []byte {
	if h.Raw != nil {
		return append(dst, h.Raw...)
	}
	dst = rawjson.AppendString(append(dst, `{"type":`...), h.Type)
	dst = rawjson.AppendInt(append(dst, `,"version":`...), int64(h.Version))
	dst = rawjson.AppendString(append(dst, `,"id":`...), h.ID)
	dst = rawjson.AppendInt(append(dst, `,"createdAt":`...), h.CreatedAt)
	if h.Type == ConversationLog {
		return append(dst, '}')
	}
	if h.Cwd != "" {
		dst = rawjson.AppendString(append(dst, `,"cwd":`...), h.Cwd)
	}
	if h.ParentSession != "" {
		dst = rawjson.AppendString(append(dst, `,"parentSession":`...), h.ParentSession)
	}
	if h.Version >= 2 {
		dst = strconv.AppendBool(append(dst, `,"isSeeded":`...), h.IsSeeded)
	} else if h.SeedLength != nil {
		dst = rawjson.AppendInt(append(dst, `,"seedLength":`...), *h.SeedLength)
	}
	if h.Origin != "" {
		dst = rawjson.AppendString(append(dst, `,"origin":`...), h.Origin)
	}
	dst = rawjson.AppendInt(append(dst, `,"delegationDepth":`...), h.DelegationDepth)
	if h.AgentPreset != "" {
		dst = rawjson.AppendString(append(dst, `,"agentPreset":`...), h.AgentPreset)
	}
	return append(dst, '}')
}
