package convlog

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/convkit/convkit/internal/rawjson"
	"github.com/convkit/convkit/internal/termtext"
)

// Every event payload has one schema: the members of its data, their JSON
// types, which are optional, and what one member requires of another.
// docs/FORMAT.md's table of event types is the schemas' (TestFormatDocListsEveryType).

// ErrPayload: an event's data breaks its type's schema.
var ErrPayload = errors.New("payload breaks its schema")

// ErrWrongLog: an event type of the other kind of log.
var ErrWrongLog = errors.New("event type of the other kind of log")

// vt is what JSON a member holds.
type vt uint8

const (
	vAny       vt = iota // any JSON, kept as it is
	vStr                 // a string
	vNonEmpty            // a non-empty string
	vLine                // a string of one line (no line break)
	vAbsPath             // an absolute path
	vInt                 // a safe integer
	vCount               // a non-negative safe integer
	vPos                 // a positive safe integer
	vNum                 // a number
	vBool                // true or false
	vTrue                // exactly true
	vIntOrNull           // a safe integer or null
	vObj                 // an object (its members are its owner's)
	vArr                 // an array (its elements are its owner's)
	vStrs                // an array of strings
	vCounts              // an array of non-negative safe integers
	vEnum                // one of enum's strings
	vShape               // an object of shape sub
	vShapes              // an array of objects of shape sub
	vBlocks              // content blocks of slot
	vBlock               // one content block of slot
	vStream              // an assistant stream
	vMessage             // a stored message of slot
	vMessages            // an array of stored messages of slot
	vQueued              // a stored message of slot that is not its event's own
	vNever               // refused when present (retired)
)

// field is one member of a shape.
type field struct {
	name string
	t    vt
	opt  bool
	enum []string
	sub  *shape
	slot slot
	why  string // why a vNever member is refused; another's refusal's hint
	// cond makes an optional member required when member cond[0] is
	// present (and, when given, one of the strings cond[1:]).
	cond []string
}

// shape is the schema of a JSON object.
type shape struct {
	name   string
	fields []field
	// closed: no member beyond fields (the reference's exact key sets).
	closed bool
	// mustBe names a missing member by what it must be, not "is missing".
	mustBe bool
	// then is the check run once every member passed its field: what one
	// member requires of another.
	then thenCheck
}

// thenCheck names a shape's check after its members. A switch, not a func
// value, calls it: the members, which callers keep in buffers on their
// stacks, then stay there.
type thenCheck uint8

const (
	thenNothing thenCheck = iota
	thenBlockStart
	thenEpochHeader
	thenCatalog
)

// problem is a schema refusal: the member it is about, from the checked
// value down (".stream[2].dt"), and what is wrong.
type problem struct {
	path string
	msg  string
	kind error // ErrPayload unless set
}

func newProblem(format string, args ...any) *problem {
	return &problem{msg: fmt.Sprintf(format, args...)}
}

// in prefixes the member the problem was found in.
func (p *problem) in(seg string) *problem {
	p.path = seg + p.path
	return p
}

func (p *problem) at(i int) *problem { return p.in(fmt.Sprintf("[%d]", i)) }

// The element types and what an array of them must be.
var (
	elemOf  = [...]vt{vStrs: vStr, vCounts: vCount, vShapes: vShape, vMessages: vQueued}
	arrayOf = [...]string{vStrs: "an array", vCounts: "an array", vShapes: "an array", vMessages: "an array of stored messages"}
)

// f, o, enum and sub build fields.
func f(name string, t vt) field             { return field{name: name, t: t} }
func o(name string, t vt) field             { return field{name: name, t: t, opt: true} }
func fEnum(name string, vs ...string) field { return field{name: name, t: vEnum, enum: vs} }
func oEnum(name string, vs ...string) field {
	return field{name: name, t: vEnum, enum: vs, opt: true}
}
func fSub(name string, s *shape) field   { return field{name: name, t: vShape, sub: s} }
func oSub(name string, s *shape) field   { return field{name: name, t: vShape, sub: s, opt: true} }
func fSubs(name string, s *shape) field  { return field{name: name, t: vShapes, sub: s} }
func oSubs(name string, s *shape) field  { return field{name: name, t: vShapes, sub: s, opt: true} }
func fBlocks(name string, sl slot) field { return field{name: name, t: vBlocks, slot: sl} }
func oBlocks(name string, sl slot) field { return field{name: name, t: vBlocks, slot: sl, opt: true} }
func fMsg(name string, sl slot) field    { return field{name: name, t: vMessage, slot: sl} }
func fMsgs(name string, sl slot) field   { return field{name: name, t: vMessages, slot: sl} }
func never(name, why string) field       { return field{name: name, t: vNever, opt: true, why: why} }

// when makes the optional fl required when member key is present, and one
// of vals when they are given.
func (fl field) when(key string, vals ...string) field {
	fl.cond = append([]string{key}, vals...)
	return fl
}

// index is the field named key, -1 when none is; the search starts at hint,
// the field after the last one found, as members mostly come in order.
func (s *shape) index(key []byte, hint int) int {
	n := len(s.fields)
	for k := 0; k < n; k++ {
		i := hint + k
		if i >= n {
			i -= n
		}
		if s.fields[i].name == string(key) {
			return i
		}
	}
	return -1
}

// checkKept checks an object whose members a reader kept, taking the
// member whose value is the very bytes of checked (not a copy) as checked.
func (s *shape) checkKept(obj []byte, ms []member, checked []byte) *problem {
	var seen uint64
	hint := 0
	for _, m := range ms {
		i := s.index(m.Key, hint)
		if i < 0 {
			if s.closed {
				return newProblem("is not a member of %s (%s)", s.name, s.memberList()).in("." + string(m.Key))
			}
			continue
		}
		seen |= 1 << i
		hint = i + 1
		if len(checked) > 0 && len(m.Value) == len(checked) && &m.Value[0] == &checked[0] {
			continue
		}
		fl := &s.fields[i]
		if p := fl.check(m.Value); p != nil {
			return p.in("." + fl.name)
		}
	}
	return s.checkRest(obj, ms, seen)
}

// checkAt is checkKept of the value at w.i, walked once: a member of a
// shape or a block is checked as the walk passes it. w.i is past the
// value, or anywhere in it when there is a problem.
func (s *shape) checkAt(w *walk, checked []byte) *problem {
	w.space()
	start := w.i
	if !w.enterObject() {
		return newProblem("must be an object, not %s", jsonKind(w.value()))
	}
	var buf [8]member
	ms := buf[:0]
	var seen uint64
	hint := 0
	for {
		k, ok := w.nextKey()
		if !ok {
			break
		}
		vs := w.i
		i := s.index(k, hint)
		if i < 0 {
			if s.closed {
				return newProblem("is not a member of %s (%s)", s.name, s.memberList()).in("." + string(k))
			}
			ms = append(ms, member{Key: k, Value: w.value()})
			continue
		}
		seen |= 1 << i
		hint = i + 1
		var p *problem
		fl := &s.fields[i]
		switch {
		case len(checked) > 0 && len(w.b)-w.i >= len(checked) && &w.b[w.i] == &checked[0]:
			w.i += len(checked)
		case fl.t == vShape:
			p = fl.sub.checkAt(w, nil)
		case fl.t == vBlock:
			p = w.block(fl.slot, nil)
		default:
			p = fl.check(w.value())
		}
		if p != nil {
			return p.in("." + fl.name)
		}
		ms = append(ms, member{Key: k, Value: w.b[vs:w.i]})
	}
	return s.checkRest(w.b[start:w.i], ms, seen)
}

// checkRest is checkKept past the members' own checks: the members
// missing, those another requires, the shape's check after its members.
func (s *shape) checkRest(obj []byte, ms []member, seen uint64) *problem {
	conds := len(s.fields) // the first absent member that another may require
	for i := range s.fields {
		switch fl := &s.fields[i]; {
		case seen&(1<<i) != 0:
		case !fl.opt && s.mustBe:
			return fl.check(nil).in("." + fl.name)
		case !fl.opt && fl.why != "":
			return newProblem("is missing (%s)", fl.why).in("." + fl.name)
		case !fl.opt:
			return newProblem("is missing").in("." + fl.name)
		case fl.cond != nil:
			conds = min(conds, i)
		}
	}
	for i := conds; i < len(s.fields); i++ {
		fl := &s.fields[i]
		if fl.cond == nil || seen&(1<<i) != 0 {
			continue
		}
		if v := memberValue(ms, fl.cond[0]); v != nil && (len(fl.cond) == 1 || enumHas(fl.cond[1:], v)) {
			what := fl.cond[0]
			if len(fl.cond) > 1 {
				what += " " + string(v)
			}
			return newProblem("is missing (%s requires it)", what).in("." + fl.name)
		}
	}
	switch s.then {
	case thenBlockStart:
		return checkBlockStart(ms)
	case thenEpochHeader:
		return checkEpochHeader(ms)
	case thenCatalog:
		return checkCatalog(obj)
	}
	return nil
}

func (s *shape) checkObject(raw []byte) *problem {
	return s.checkWalked(raw, nil)
}

// checkWalked is checkKept of the object raw, walked once.
func (s *shape) checkWalked(raw, checked []byte) *problem {
	w := walk{b: raw}
	return s.checkAt(&w, checked)
}

func (s *shape) memberList() string {
	names := make([]string, len(s.fields))
	for i, fl := range s.fields {
		names[i] = fl.name
	}
	return "its members are " + strings.Join(names, ", ")
}

func (fl *field) check(v []byte) *problem {
	switch fl.t {
	case vAny:
		return nil
	case vStr:
		if !isString(v) && fl.why != "" {
			return mustBe("a string ("+fl.why+")", v)
		} else if !isString(v) {
			return mustBe("a string", v)
		}
	case vNonEmpty:
		if !nonEmptyString(v) {
			return mustBe("a non-empty string", v)
		}
	case vLine:
		if !isString(v) {
			return mustBe("a string", v)
		}
		if s := unquoted(v); bytes.IndexByte(s, '\n') >= 0 || bytes.IndexByte(s, '\r') >= 0 {
			return newProblem("must be one line: it holds a line break")
		}
	case vAbsPath:
		if s := unquoted(v); !isString(v) || len(s) == 0 || s[0] != '/' {
			return mustBe("an absolute path", v)
		}
	case vInt:
		if _, ok := rawjson.Int(v); !ok {
			return mustBe("a safe integer", v)
		}
	case vCount:
		if n, ok := rawjson.Int(v); !ok || n < 0 {
			return mustBe("a non-negative safe integer", v)
		}
	case vPos:
		if n, ok := rawjson.Int(v); !ok || n < 1 {
			return mustBe("a positive safe integer", v)
		}
	case vNum:
		if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
			return mustBe("a number", v)
		}
	case vBool:
		if string(v) != "true" && string(v) != "false" {
			return mustBe("true or false", v)
		}
	case vTrue:
		if string(v) != "true" {
			return mustBe("exactly true (or absent)", v)
		}
	case vIntOrNull:
		if _, ok := rawjson.Int(v); !ok && string(v) != "null" {
			return mustBe("a safe integer or null", v)
		}
	case vObj:
		if len(v) == 0 || v[0] != '{' {
			return mustBe("an object", v)
		}
	case vArr:
		if len(v) == 0 || v[0] != '[' {
			return mustBe("an array", v)
		}
	case vStrs, vCounts, vShapes, vMessages:
		if len(v) == 0 || v[0] != '[' {
			return mustBe(arrayOf[fl.t], v)
		}
		el := *fl
		el.t = elemOf[fl.t]
		for i, e := range elements(v) {
			if p := el.check(e); p != nil {
				return p.at(i)
			}
		}
	case vEnum:
		if !enumHas(fl.enum, v) {
			return newProblem("must be one of %s, not %s", enumList(fl.enum), clip(v))
		}
	case vShape:
		return fl.sub.checkObject(v)
	case vBlocks:
		return checkBlocks(v, fl.slot, nil)
	case vBlock:
		w := walk{b: v}
		return w.block(fl.slot, nil)
	case vStream:
		return checkStream(v)
	case vMessage:
		// The event's own message: the Validator checks the rest.
		if len(v) == 0 || v[0] != '{' {
			return mustBe("a stored message (an object)", v)
		}
	case vQueued:
		return checkOtherMessage(v, fl.slot)
	case vNever:
		return newProblem("%s", fl.why)
	}
	return nil
}

func isString(v []byte) bool { return len(v) >= 2 && v[0] == '"' }

func mustBe(what string, v []byte) *problem {
	return newProblem("must be %s, not %s", what, jsonKind(v))
}

// jsonKind names a value for an error: its JSON type, and a short value.
func jsonKind(v []byte) string {
	if len(v) == 0 {
		return "nothing"
	}
	kind := ""
	switch v[0] {
	case '{':
		kind = "an object"
	case '[':
		kind = "an array"
	case '"':
		kind = "a string"
	case 't', 'f':
		kind = "a boolean"
	case 'n':
		return "null"
	default:
		kind = "a number"
	}
	if len(v) <= 24 && v[0] != '{' && v[0] != '[' {
		return kind + " " + termtext.Escape(string(v))
	}
	return kind
}

func clip(v []byte) string {
	if len(v) > 40 {
		return termtext.Escape(string(v[:40])) + "…"
	}
	return termtext.Escape(string(v))
}

func enumHas(vs []string, raw []byte) bool {
	s := unquoted(raw)
	if s == nil {
		return false
	}
	for _, e := range vs {
		if string(s) == e {
			return true
		}
	}
	return false
}

func enumList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = termtext.Quote(v)
	}
	return strings.Join(q, ", ")
}
