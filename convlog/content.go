package convlog

import (
	"bytes"
	"strings"
	"sync/atomic"

	"github.com/convkit/convkit/internal/rawjson"
	"github.com/convkit/convkit/internal/termtext"
)

// The schemas of content blocks, stored messages in their slots, and the
// records of an assistant stream, read in one walk of validated JSON.

// slot is where content or a message is: it decides the role, the source
// kinds and the block kinds admitted.
type slot uint8

const (
	slotUser      slot = iota + 1 // user/message, queued and title messages
	slotSystem                    // system/message
	slotDeveloper                 // developer/message: tool additions and removals
	slotAssistant                 // assistant/message, stream blocks
	slotTool                      // tool/result
	slotSummary                   // compaction summaries: no tool-result or tool-change blocks
	slotPlain                     // PTC dispatches, team messages: no tool-result blocks
)

var (
	slotRoles = [...]string{slotUser: "user", slotSystem: "system", slotDeveloper: "developer", slotAssistant: "assistant", slotTool: "tool"}
	slotNames = [...]string{slotUser: "user message", slotSystem: "system message", slotDeveloper: "developer message",
		slotAssistant: "assistant message", slotTool: "tool message", slotSummary: "compaction summary", slotPlain: "content"}
)

// blockInfo is what a walk of content collects for the rules beyond it.
type blockInfo struct {
	calls     []advertised // tool-call blocks
	additions [][]byte     // tool-addition names (raw JSON strings)
}

// advertised is a tool call an answer asks for.
type advertised struct {
	id, name, args []byte // raw JSON strings
}

var (
	imageDimsShape       = &shape{name: "originalDimensions", fields: []field{f("width", vPos), f("height", vPos)}}
	imageAttachmentShape = &shape{name: "image attachment", fields: []field{
		f("attachmentId", vNonEmpty), fEnum("mediaType", "image/png", "image/jpeg", "image/webp", "image/gif"),
		f("bytes", vCount), f("width", vPos), f("height", vPos), o("name", vStr), oSub("originalDimensions", imageDimsShape)}}
	fileAttachmentShape = &shape{name: "file attachment", fields: []field{f("attachmentId", vNonEmpty), f("name", vStr), f("bytes", vCount)}}
)

// checkBlocks checks a content array of slot sl; bi, when set, collects
// its tool calls and tool additions.
func checkBlocks(raw []byte, sl slot, bi *blockInfo) *problem {
	w := walk{b: raw}
	if !w.enterArray() {
		return mustBe("an array of content blocks", raw)
	}
	// One pass over the content, a tool's output being most of a log.
	for k := 0; w.nextElem(); k++ {
		if p := w.block(sl, bi); p != nil {
			return p.at(k)
		}
	}
	return nil
}

// blockShapes are the members of the content block kinds the format
// defines; another kind is kept as it is.
var blockShapes = map[string]*shape{
	"text":      textBlockShape,
	"reasoning": textBlockShape,
	"tool-call": {name: "a tool-call block", mustBe: true, fields: []field{f("id", vNonEmpty), f("name", vNonEmpty), {name: "arguments", t: vStr, why: "the arguments' JSON text"}}},
	"image": {name: "an image block", fields: []field{{name: "attachment", t: vShape, sub: imageAttachmentShape, why: "an image block needs it"},
		o("offloaded", vTrue)}},
	"file": {name: "a file block", fields: []field{{name: "attachment", t: vShape, sub: fileAttachmentShape, why: "a file block needs it"}}},
	"tool-addition": {name: "a tool-addition block", mustBe: true, fields: []field{f("toolName", vNonEmpty),
		never("tool", "must be absent: an addition names its tool, defined in the request/header headerSeq names")}},
	"tool-removal": {name: "a tool-removal block", mustBe: true, fields: []field{f("toolName", vNonEmpty)}},
}

var textBlockShape = &shape{name: "a text block", mustBe: true, fields: []field{f("text", vStr)}}

// block checks the content block at w.i, walking past it: a non-empty type
// and the members of its kind; a tool-result wrapper is refused (v4 has
// tool/result events).
func (w *walk) block(sl slot, bi *blockInfo) *problem {
	var buf [8]member
	obj, ms := w.members(buf[:0])
	if len(obj) == 0 || obj[0] != '{' {
		return mustBe("a content block (an object)", obj)
	}
	typ := memberValue(ms, "type")
	if !nonEmptyString(typ) {
		if typ == nil {
			return newProblem("is missing (a content block needs its type)").in(".type")
		}
		return mustBe("a non-empty string", typ).in(".type")
	}
	t := string(unquoted(typ))
	switch t {
	case "tool-result":
		return newProblem("a tool-result wrapper, retired in format v4: a tool's result is the tool-role message of a tool/result event").in(".type")
	case "tool-addition", "tool-removal":
		if sl != slotDeveloper {
			return newProblem("%s block in a %s: tool additions and removals belong to developer messages", termtext.Quote(t), slotNames[sl]).in(".type")
		}
	}
	s := blockShapes[t]
	if s == nil {
		return nil
	}
	if p := s.checkKept(obj, ms, nil); p != nil || bi == nil {
		return p
	}
	switch t {
	case "tool-call":
		bi.calls = append(bi.calls, advertised{id: memberValue(ms, "id"), name: memberValue(ms, "name"), args: memberValue(ms, "arguments")})
	case "tool-addition":
		bi.additions = append(bi.additions, memberValue(ms, "toolName"))
	}
	return nil
}

// checkOtherMessage checks a stored message that is not its event's own (a
// queued one, a title request's).
func checkOtherMessage(raw []byte, sl slot) *problem {
	mf, ok := scanMessage(raw)
	if !ok {
		return mustBe("a stored message (an object)", raw)
	}
	if err := mf.identityError(); err != nil {
		return &problem{msg: err.Error(), kind: ErrMessageIdentity}
	}
	if roleOf(mf.role) != slotRoles[sl] {
		return newProblem("must be %s, not %s", termtext.Quote(slotRoles[sl]), clip(mf.role)).in(".role")
	}
	return checkMessageBody(&mf, sl, nil)
}

// checkMessageBody checks a stored message of slot sl beyond its identity;
// a wrong role is left to the interpreter.
func checkMessageBody(mf *messageFields, sl slot, bi *blockInfo) *problem {
	if roleOf(mf.role) != slotRoles[sl] {
		return nil
	}
	if p := checkSourceOf(mf, sl); p != nil {
		p.kind = ErrMessageIdentity
		return p.in(".source")
	}
	if mf.content == nil {
		return newProblem("is missing (a stored message holds an array of content blocks)").in(".content")
	}
	if p := checkBlocks(mf.content, sl, bi); p != nil {
		return p.in(".content")
	}
	if sl == slotTool && mf.isError != nil && string(mf.isError) != "true" && string(mf.isError) != "false" {
		return mustBe("true or false", mf.isError).in(".isError")
	}
	return nil
}

var (
	systemSourceShape = &shape{name: "a system prompt's source", closed: true, fields: []field{fEnum("kind", "system-prompt")}}
	modelSourceShape  = &shape{name: "a model's source", closed: true, fields: []field{fEnum("kind", "model"),
		f("provider", vStr), f("model", vStr), o("replayState", vAny)}}
	toolSourceShape       = &shape{name: "a tool's source", closed: true, fields: []field{fEnum("kind", "tool"), f("callId", vNonEmpty)}}
	sourceShapes          = [slotPlain + 1]*shape{slotSystem: systemSourceShape, slotAssistant: modelSourceShape, slotTool: toolSourceShape}
	checkpointSourceShape = &shape{name: "a checkpoint's source", fields: []field{fEnum("kind", "compact-checkpoint"),
		f("compactionId", vNonEmpty), o("sourceCommandId", vStr)}}
)

// checkSourceOf is checkSource from the members the scan counted, walking
// the source only to name what is wrong.
func checkSourceOf(mf *messageFields, sl slot) *problem {
	ok := false
	switch sl {
	case slotSystem:
		ok = mf.srcMembers == 1 && string(mf.kind) == `"system-prompt"`
	case slotAssistant:
		n := 3
		if mf.srcReplay {
			n++
		}
		ok = mf.srcMembers == n && string(mf.kind) == `"model"` && isString(mf.srcProvider) && isString(mf.srcModel)
	case slotTool:
		ok = mf.srcMembers == 2 && string(mf.kind) == `"tool"` && nonEmptyString(mf.sourceCallID)
	}
	if ok {
		return nil
	}
	return checkSource(mf.source, mf.kind, sl)
}

func checkSource(src, kind []byte, sl slot) *problem {
	if s := sourceShapes[sl]; s != nil {
		return s.checkObject(src)
	}
	switch k := unquoted(kind); string(k) {
	case "model", "tool", "system-prompt":
		return newProblem("%s is the kind of a %s message: a %s carries another", termtext.Quote(string(k)),
			map[string]string{"model": "model's (assistant)", "tool": "tool's (tool/result)", "system-prompt": "system"}[string(k)], slotNames[sl]).in(".kind")
	case "compact-checkpoint":
		return checkpointSourceShape.checkObject(src)
	}
	return nil
}

// The records of an assistant stream (data.stream of assistant/message and
// assistant/attempt), each with exactly its members, and the chunks a
// "chunk" record holds.
var (
	finishShape = &shape{name: "finish reason", fields: []field{fEnum("kind", "stop", "tool-calls", "max-tokens", "error", "aborted"),
		oSub("failure", failureShape).when("kind", "error", "aborted")}}
	// chunkShapes are the stream chunk types, in the order errors and
	// docs list them.
	chunkShapes = []*shape{
		{name: "text-delta", fields: []field{f("index", vCount), f("text", vStr)}},
		{name: "reasoning-delta", fields: []field{f("index", vCount), f("text", vStr)}},
		{name: "tool-call-delta", fields: []field{f("index", vCount), f("id", vStr), o("name", vStr), f("argumentsDelta", vStr)}},
		{name: "block-start", fields: []field{f("index", vCount), f("blockType", vNonEmpty)}, then: thenBlockStart},
		blockEndShape,
		{name: "usage", fields: []field{fSub("usage", usageShape)}},
		{name: "finish", fields: []field{fSub("reason", finishShape), o("replayState", vObj)}},
	}
)

var blockEndShape = &shape{name: "block-end", fields: []field{f("index", vCount), {name: "block", t: vBlock, slot: slotAssistant}}}

// chunkShape is the shape of a chunk of type typ (raw), nil for none.
func chunkShape(typ []byte) *shape {
	t := unquoted(typ)
	for _, s := range chunkShapes {
		if s.name == string(t) {
			return s
		}
	}
	return nil
}

func chunkTypes() string {
	names := make([]string, len(chunkShapes))
	for i, s := range chunkShapes {
		names[i] = s.name
	}
	return strings.Join(names, ", ")
}

func checkBlockStart(ms []member) *problem {
	switch t := unquoted(memberValue(ms, "blockType")); string(t) {
	case "tool-result", "tool-addition", "tool-removal":
		return newProblem("%s blocks are not an answer's", termtext.Quote(string(t))).in(".blockType")
	}
	return nil
}

// checkStream checks an assistant stream's records (docs/FORMAT.md).
func checkStream(raw []byte) *problem {
	w := walk{b: raw}
	if !w.enterArray() {
		return mustBe("an array of stream records", raw)
	}
	// One buffer for every record's chunk members, not one cleared a record.
	var buf [8]member
	for k := 0; w.nextElem(); k++ {
		if writerRecord(&w) {
			continue
		}
		if p := checkRecord(&w, buf[:0]); p != nil {
			return p.at(k)
		}
	}
	return nil
}

// writerRecord checks the record at w.i when it is laid out as the writer
// writes it (Stream.Records: its members in order, no white space),
// finding each member by its bytes instead of walking its key. It is true
// only for a record checkRecord admits; on false w.i is back at the record
// for checkRecord, which says what is wrong.
func writerRecord(w *walk) bool {
	start := w.i
	ok := false
	switch {
	case w.lit(`{"type":"chunk","time":`):
		_, isInt := rawjson.Int(w.value())
		ok = isInt && w.lit(`,"chunk":`)
		if ok {
			p, checked := w.checkedChunk()
			ok = checked && p == nil
		}
	case w.lit(`{"type":"text-chunks","time0":`), w.lit(`{"type":"reasoning-chunks","time0":`):
		ok = w.writerRun(false)
	case w.lit(`{"type":"tool-call-chunks","time0":`):
		ok = w.writerRun(true)
	}
	if !ok || !w.lit("}") {
		w.i = start
		return false
	}
	return true
}

// writerRun is writerRecord of a run of deltas, past its type.
func (w *walk) writerRun(call bool) bool {
	time0 := w.value()
	if !w.lit(`,"index":`) {
		return false
	}
	index := w.value()
	if !w.lit(`,"dt":`) {
		return false
	}
	dt := w.value()
	key, name := `,"texts":`, "texts"
	if call {
		if !w.lit(`,"id":`) || !nonEmptyString(w.value()) {
			return false
		}
		if w.lit(`,"name":`) && !nonEmptyString(w.value()) {
			return false
		}
		key, name = `,"args":`, "args"
	}
	if !w.lit(key) {
		return false
	}
	pieces, n, bad := w.strings()
	return checkRun(time0, index, dt, pieces, name, n, bad) == nil
}

// lit steps over s when the walk is at it.
func (w *walk) lit(s string) bool {
	if len(w.b)-w.i >= len(s) && string(w.b[w.i:w.i+len(s)]) == s {
		w.i += len(s)
		return true
	}
	return false
}

// recKeys are a stream record's members; checkRecord keeps member i's
// value at v[i] and its presence as bit 1<<i.
var recKeys = [...]string{"type", "time0", "index", "dt", "texts", "id", "name", "args", "time", "chunk"}

const (
	rType = iota
	rTime0
	rIndex
	rDt
	rTexts
	rID
	rName
	rArgs
	rTime
	rChunk
)

// recKey is the index of the record member named k in recKeys,
// len(recKeys) when it is none (a switch: one comparison or two a key).
func recKey(k []byte) int {
	switch string(k) {
	case "type":
		return rType
	case "time0":
		return rTime0
	case "index":
		return rIndex
	case "dt":
		return rDt
	case "texts":
		return rTexts
	case "id":
		return rID
	case "name":
		return rName
	case "args":
		return rArgs
	case "time":
		return rTime
	case "chunk":
		return rChunk
	}
	return len(recKeys)
}

// checkRecord checks the stream record w is at, walking past it once; buf
// holds its chunk's members.
func checkRecord(w *walk, buf []member) *problem {
	if !w.enterObject() {
		return mustBe("a stream record (an object)", w.value())
	}
	var v [len(recKeys)][]byte
	var have, pieces int
	var badPiece *problem
	var other []byte
	var chunkMembers []member
	for {
		k, ok := w.nextKey()
		if !ok {
			break
		}
		i := recKey(k)
		switch i {
		case rTexts, rArgs:
			v[i], pieces, badPiece = w.strings()
		case rChunk:
			v[i], chunkMembers = w.members(buf)
		case len(recKeys):
			w.value()
			if other == nil {
				other = k
			}
			continue
		default:
			v[i] = w.value()
		}
		have |= 1 << i
	}
	typ, time0, index, dt, id, name := v[rType], v[rTime0], v[rIndex], v[rDt], v[rID], v[rName]
	exact := func(want, optional int, members string) *problem {
		if other != nil {
			return newProblem("is not a member of a %s record (exactly %s)", str(typ), members).in("." + string(other))
		}
		if have&^optional != want || have&^(want|optional) != 0 {
			return newProblem("a %s record holds exactly %s", str(typ), members)
		}
		return nil
	}
	switch string(typ) {
	case `"text-chunks"`, `"reasoning-chunks"`:
		if p := exact(1<<rType|1<<rTime0|1<<rIndex|1<<rDt|1<<rTexts, 0, "type, time0, index, dt, texts"); p != nil {
			return p
		}
		return checkRun(time0, index, dt, v[rTexts], "texts", pieces, badPiece)
	case `"tool-call-chunks"`:
		if p := exact(1<<rType|1<<rTime0|1<<rIndex|1<<rDt|1<<rID|1<<rArgs, 1<<rName, "type, time0, index, dt, id, name (optional), args"); p != nil {
			return p
		}
		if !nonEmptyString(id) {
			return mustBe("a non-empty string", id).in(".id")
		}
		if name != nil && !nonEmptyString(name) {
			return mustBe("a non-empty string (or absent)", name).in(".name")
		}
		return checkRun(time0, index, dt, v[rArgs], "args", pieces, badPiece)
	case `"chunk"`:
		if p := exact(1<<rType|1<<rTime|1<<rChunk, 0, "type, time, chunk"); p != nil {
			return p
		}
		if _, ok := rawjson.Int(v[rTime]); !ok {
			return mustBe("a safe integer", v[rTime]).in(".time")
		}
		if p := checkChunk(v[rChunk], chunkMembers); p != nil {
			return p.in(".chunk")
		}
		return nil
	}
	if typ == nil {
		return newProblem("is missing (a stream record is text-chunks, reasoning-chunks, tool-call-chunks or chunk)").in(".type")
	}
	return newProblem("%s is not a stream record type (text-chunks, reasoning-chunks, tool-call-chunks, chunk)", clip(typ)).in(".type")
}

// checkRun checks a run of deltas: time0, index, the gaps and the n pieces
// (bad: the first that is not a string).
func checkRun(time0, index, dt, pieces []byte, piecesName string, n int, bad *problem) *problem {
	t, ok := rawjson.Int(time0)
	if !ok {
		return mustBe("a safe integer", time0).in(".time0")
	}
	if n, ok := rawjson.Int(index); !ok || n < 0 {
		return mustBe("a non-negative safe integer", index).in(".index")
	}
	if len(pieces) == 0 || pieces[0] != '[' {
		return mustBe("a non-empty array of strings", pieces).in("." + piecesName)
	}
	if bad != nil {
		return bad.in("." + piecesName)
	}
	if n == 0 {
		return newProblem("must not be empty").in("." + piecesName)
	}
	if len(dt) == 0 || dt[0] != '[' {
		return mustBe("an array of time gaps", dt).in(".dt")
	}
	gaps := 0
	for i, v := range elements(dt) {
		d, ok := rawjson.Int(v)
		if !ok {
			return mustBe("a safe integer", v).at(i).in(".dt")
		}
		if t += d; t > rawjson.MaxSafeInt || t < -rawjson.MaxSafeInt {
			return newProblem("puts a member's time beyond a safe integer").at(i).in(".dt")
		}
		gaps++
	}
	if gaps != n-1 {
		return newProblem("holds %d time gaps for %d %s: one fewer than the %s", gaps, n, piecesName, piecesName).in(".dt")
	}
	return nil
}

// checkedChunk checks the chunk at w.i as it walks past it when its type
// comes first, as the writer puts it (checked); w.i stays at another.
func (w *walk) checkedChunk() (p *problem, checked bool) {
	w.space()
	start := w.i
	peek := *w
	if peek.enterObject() {
		if k, ok := peek.nextKey(); ok && string(k) == "type" {
			if s := chunkShape(peek.value()); s != nil {
				var sum uint64
				if s != blockEndShape {
					peek.i = start
					sum = contentHash(peek.value())
					if admittedChunks[(sum>>1)%uint64(len(admittedChunks))].Load() == sum {
						w.i = peek.i
						return nil, true
					}
				}
				if p = s.checkAt(w, nil); p != nil {
					w.i = start
					w.value()
				} else if sum != 0 {
					admittedChunks[(sum>>1)%uint64(len(admittedChunks))].Store(sum)
				}
				return p, true
			}
		}
	}
	return nil, false
}

// admittedChunks are the hashes of stream chunks this process found to
// keep their schema, one a slot, which any check takes as checked: answer
// after answer starts and ends its blocks and finishes with the same
// bytes. A block end, whose block is the answer's own, is not kept.
var admittedChunks [64]atomic.Uint64

// checkChunk checks the chunk of a "chunk" record, whose members the
// record's walk read.
func checkChunk(raw []byte, ms []member) *problem {
	if len(raw) == 0 || raw[0] != '{' {
		return mustBe("a stream chunk (an object)", raw)
	}
	typ := memberValue(ms, "type")
	s := chunkShape(typ)
	if s == nil {
		if typ == nil {
			return newProblem("is missing (a chunk is one of %s)", chunkTypes()).in(".type")
		}
		return newProblem("%s is not a stream chunk type (%s)", clip(typ), chunkTypes()).in(".type")
	}
	return s.checkKept(raw, ms, nil)
}

// walk reads validated JSON in place, each byte once (a string is skipped,
// not decoded).
type walk struct {
	b []byte
	i int
}

func (w *walk) space() { w.i = skipSpace(w.b, w.i) }

// enterArray steps into the array at w.i; false when it is no array.
func (w *walk) enterArray() bool {
	w.space()
	if w.i >= len(w.b) || w.b[w.i] != '[' {
		return false
	}
	w.i++
	return true
}

// nextElem moves to the next element of the array entered, false past its
// end.
func (w *walk) nextElem() bool {
	w.space()
	if w.i >= len(w.b) {
		return false
	}
	switch w.b[w.i] {
	case ']':
		w.i++
		return false
	case ',':
		w.i++
		w.space()
	}
	return w.i < len(w.b)
}

// enterObject steps into the object at w.i; false when it is no object
// (w.i stays on the value).
func (w *walk) enterObject() bool {
	w.space()
	if w.i >= len(w.b) || w.b[w.i] != '{' {
		return false
	}
	w.i++
	return true
}

// nextKey returns the next member's decoded key, w.i then at its value;
// false past the object's end. (Locals, not w's fields, carry the offset:
// this runs for every key of every walk.)
func (w *walk) nextKey() ([]byte, bool) {
	b, i := w.b, skipSpace(w.b, w.i)
	if i < len(b) && b[i] == ',' {
		i = skipSpace(b, i+1)
	}
	if i >= len(b) || b[i] != '"' {
		if i < len(b) && b[i] == '}' {
			i++
		}
		w.i = i
		return nil, false
	}
	ks := i
	// A short plain key (most are) is found in two words, with no escape.
	ke := rawjson.PlainKeyEnd(b, ks)
	plain := ke >= 0
	if !plain {
		var err error
		if ke, err = rawjson.Next(b, ks); err != nil {
			w.i = len(b)
			return nil, false
		}
	}
	key := b[ks+1 : ke-1]
	if !plain && bytes.IndexByte(key, '\\') >= 0 {
		s, _ := rawjson.String(b[ks:ke])
		key = []byte(s)
	}
	i = skipSpace(b, ke)
	if i < len(b) && b[i] == ':' {
		i++
	}
	w.i = skipSpace(b, i)
	return key, true
}

// skipSpace is rawjson.SkipSpace where compact JSON, which has no white
// space, costs one comparison.
func skipSpace(b []byte, i int) int {
	if i < len(b) && b[i] > ' ' {
		return i
	}
	return rawjson.SkipSpace(b, i)
}

// value returns the value at w.i, walking past it.
func (w *walk) value() []byte {
	b := w.b
	start := skipSpace(b, w.i)
	end, err := rawjson.Next(b, start)
	if err != nil {
		w.i = len(b)
		return b[start:]
	}
	w.i = end
	return b[start:end]
}

// members walks past the value at w.i and, when it is an object, appends
// its members (key and value) to buf.
func (w *walk) members(buf []member) ([]byte, []member) {
	w.space()
	start := w.i
	if !w.enterObject() {
		return w.value(), buf
	}
	for {
		k, ok := w.nextKey()
		if !ok {
			return w.b[start:w.i], buf
		}
		buf = append(buf, member{Key: k, Value: w.value()})
	}
}

// strings walks past the array of strings at w.i, returning it, its length
// and a problem with its first element that is not a string.
func (w *walk) strings() (v []byte, n int, bad *problem) {
	w.space()
	start := w.i
	if w.i >= len(w.b) || w.b[w.i] != '[' {
		return w.value(), 0, nil
	}
	w.enterArray()
	for ; w.nextElem(); n++ {
		e := w.value()
		if !isString(e) && bad == nil {
			bad = mustBe("a string", e).at(n)
		}
	}
	return w.b[start:w.i], n, bad
}
