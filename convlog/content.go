package convlog

import (
	"bytes"

	"github.com/convkit/convkit/display"
	"github.com/convkit/convkit/internal/rawjson"
)

// The schemas of what messages and streams hold: content blocks, stored
// messages in their slots, and the records of an assistant stream. Values
// are validated JSON; a walk skips strings without decoding them.

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

var slotRoles = [...]string{slotUser: "user", slotSystem: "system", slotDeveloper: "developer", slotAssistant: "assistant", slotTool: "tool"}

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
	if len(raw) == 0 || raw[0] != '[' {
		return mustBe("an array of content blocks", raw)
	}
	for it, i := rawjson.Array(raw), 0; ; i++ {
		blk, ok := it.Next()
		if !ok {
			return nil
		}
		if p := checkBlock(blk, sl, bi); p != nil {
			return p.at(i)
		}
	}
}

// checkBlock checks one content block: a non-empty type, the members of
// the kinds the format defines (text, reasoning, tool-call, image, file,
// and in a developer message tool-addition and tool-removal); a block of
// another kind is kept as it is. A tool-result wrapper is refused: format
// v4 records a tool's result as a tool/result event.
func checkBlock(blk []byte, sl slot, bi *blockInfo) *problem {
	it := objectIter(blk)
	if it.bad {
		return mustBe("a content block (an object)", blk)
	}
	var typ, text, id, name, args, att, toolName, tool, offloaded []byte
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch string(k) {
		case "type":
			typ = v
		case "text":
			text = v
		case "id":
			id = v
		case "name":
			name = v
		case "arguments":
			args = v
		case "attachment":
			att = v
		case "toolName":
			toolName = v
		case "tool":
			tool = v
		case "offloaded":
			offloaded = v
		}
	}
	if !nonEmptyString(typ) {
		if typ == nil {
			return newProblem("is missing (a content block needs its type)").in(".type")
		}
		return mustBe("a non-empty string", typ).in(".type")
	}
	switch string(unquoted(typ)) {
	case "text", "reasoning":
		if !isString(text) {
			return mustBe("a string", text).in(".text")
		}
	case "tool-call":
		switch {
		case !nonEmptyString(id):
			return mustBe("a non-empty string", id).in(".id")
		case !nonEmptyString(name):
			return mustBe("a non-empty string", name).in(".name")
		case !isString(args):
			return mustBe("a string (the arguments' JSON text)", args).in(".arguments")
		}
		if bi != nil {
			bi.calls = append(bi.calls, advertised{id: id, name: name, args: args})
		}
	case "image":
		if att == nil {
			return newProblem("is missing (an image block needs it)").in(".attachment")
		}
		if p := imageAttachmentShape.checkObject(att); p != nil {
			return p.in(".attachment")
		}
		if offloaded != nil && string(offloaded) != "true" {
			return mustBe("exactly true (or absent)", offloaded).in(".offloaded")
		}
	case "file":
		if att == nil {
			return newProblem("is missing (a file block needs it)").in(".attachment")
		}
		if p := fileAttachmentShape.checkObject(att); p != nil {
			return p.in(".attachment")
		}
	case "tool-addition", "tool-removal":
		if sl != slotDeveloper {
			return newProblem("%s block in a %s: tool additions and removals belong to developer messages", display.Quote(str(typ)), slotName(sl)).in(".type")
		}
		if !nonEmptyString(toolName) {
			return mustBe("a non-empty string", toolName).in(".toolName")
		}
		if tool != nil && string(unquoted(typ)) == "tool-addition" {
			return newProblem("must be absent: an addition names its tool, defined in the request/header headerSeq names").in(".tool")
		}
		if bi != nil && string(unquoted(typ)) == "tool-addition" {
			bi.additions = append(bi.additions, toolName)
		}
	case "tool-result":
		return newProblem("a tool-result wrapper, retired in format v4: a tool's result is the tool-role message of a tool/result event").in(".type")
	}
	return nil
}

func slotName(sl slot) string {
	switch sl {
	case slotSummary:
		return "compaction summary"
	case slotPlain:
		return "content"
	}
	return slotRoles[sl] + " message"
}

// checkOtherMessage checks a stored message that is not its event's own
// (one queued by agent/inbox/spliced, one of a title request): its
// identity, role and body.
func checkOtherMessage(raw []byte, sl slot) *problem {
	mf, ok := scanMessage(raw)
	if !ok {
		return mustBe("a stored message (an object)", raw)
	}
	if err := mf.identityError(); err != nil {
		return &problem{msg: err.Error(), kind: ErrMessageIdentity}
	}
	if roleOf(mf.role) != slotRoles[sl] {
		return newProblem("must be %s, not %s", display.Quote(slotRoles[sl]), clip(mf.role)).in(".role")
	}
	return checkMessageBody(&mf, sl, nil)
}

// checkMessageBody checks what a stored message of slot sl holds beyond
// its identity (msgcheck.go): its source's kind and members where the
// slot fixes them (system, model and tool sources are strict; user and
// developer messages carry any producer's kind but those three), its
// content blocks and a tool message's isError. A message of another
// role than the slot's is left to the history's interpreter, which names
// the role expected.
func checkMessageBody(mf *messageFields, sl slot, bi *blockInfo) *problem {
	if roleOf(mf.role) != slotRoles[sl] {
		return nil
	}
	if p := checkSource(mf.source, mf.kind, sl); p != nil {
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
	checkpointSourceShape = &shape{name: "a checkpoint's source", fields: []field{fEnum("kind", "compact-checkpoint"),
		f("compactionId", vNonEmpty), o("sourceCommandId", vStr)}}
)

// checkSource checks a message's source (an object with a producer-owned
// kind, msgcheck.go) for its slot.
func checkSource(src, kind []byte, sl slot) *problem {
	switch sl {
	case slotSystem:
		return systemSourceShape.checkObject(src)
	case slotAssistant:
		return modelSourceShape.checkObject(src)
	case slotTool:
		return toolSourceShape.checkObject(src)
	}
	switch k := unquoted(kind); string(k) {
	case "model", "tool", "system-prompt":
		return newProblem("%s is the kind of a %s message: a %s carries another", display.Quote(string(k)),
			map[string]string{"model": "model's (assistant)", "tool": "tool's (tool/result)", "system-prompt": "system"}[string(k)], slotName(sl)).in(".kind")
	case "compact-checkpoint":
		return checkpointSourceShape.checkObject(src)
	}
	return nil
}

// The records of an assistant stream (data.stream of assistant/message and
// assistant/attempt), each with exactly its members, and the chunks a
// "chunk" record holds.
var (
	finishShape = &shape{name: "finish reason", fields: []field{
		fEnum("kind", "stop", "tool-calls", "max-tokens", "error", "aborted"), oSub("failure", failureShape)},
		check: func(obj []byte) *problem {
			if k := str(rawjson.Get(obj, "kind")); k == "error" || k == "aborted" {
				return requires(obj, "failure", `kind "`+k+`"`)
			}
			return nil
		}}
	chunkShapes = map[string]*shape{
		"text-delta":      {name: "text-delta", fields: []field{f("index", vCount), f("text", vStr)}},
		"reasoning-delta": {name: "reasoning-delta", fields: []field{f("index", vCount), f("text", vStr)}},
		"tool-call-delta": {name: "tool-call-delta", fields: []field{f("index", vCount), f("id", vStr), o("name", vStr), f("argumentsDelta", vStr)}},
		"block-start":     {name: "block-start", fields: []field{f("index", vCount), f("blockType", vNonEmpty)}, check: checkBlockStart},
		"block-end":       {name: "block-end", fields: []field{f("index", vCount), {name: "block", t: vBlock, slot: slotAssistant}}},
		"usage":           {name: "usage", fields: []field{fSub("usage", usageShape)}},
		"finish":          {name: "finish", fields: []field{fSub("reason", finishShape), o("replayState", vObj)}},
	}
	// chunkTypes lists chunkShapes' keys in order, for errors and docs.
	chunkTypes = []string{"text-delta", "reasoning-delta", "tool-call-delta", "block-start", "block-end", "usage", "finish"}
)

func checkBlockStart(obj []byte) *problem {
	switch str(rawjson.Get(obj, "blockType")) {
	case "tool-result", "tool-addition", "tool-removal":
		return newProblem("%s blocks are not an answer's", display.Quote(str(rawjson.Get(obj, "blockType")))).in(".blockType")
	}
	return nil
}

// checkStream checks an assistant stream: text-chunks and
// reasoning-chunks {type, time0, index, dt, texts}, tool-call-chunks
// {type, time0, index, dt, id, name?, args}, chunk {type, time, chunk};
// texts and args non-empty arrays of strings, dt one time gap fewer than
// them (member k's time is time0 plus the first k gaps, a safe integer).
func checkStream(raw []byte) *problem {
	if len(raw) == 0 || raw[0] != '[' {
		return mustBe("an array of stream records", raw)
	}
	for it, i := rawjson.Array(raw), 0; ; i++ {
		rec, ok := it.Next()
		if !ok {
			return nil
		}
		if p := checkRecord(rec); p != nil {
			return p.at(i)
		}
	}
}

// Members of a stream record, as bits.
const (
	recType = 1 << iota
	recTime0
	recIndex
	recDt
	recTexts
	recID
	recName
	recArgs
	recTime
	recChunk
)

func checkRecord(rec []byte) *problem {
	it := objectIter(rec)
	if it.bad {
		return mustBe("a stream record (an object)", rec)
	}
	var typ, time0, index, dt, texts, id, name, args, tim, chunk []byte
	var have int
	var other []byte
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch string(k) {
		case "type":
			typ, have = v, have|recType
		case "time0":
			time0, have = v, have|recTime0
		case "index":
			index, have = v, have|recIndex
		case "dt":
			dt, have = v, have|recDt
		case "texts":
			texts, have = v, have|recTexts
		case "id":
			id, have = v, have|recID
		case "name":
			name, have = v, have|recName
		case "args":
			args, have = v, have|recArgs
		case "time":
			tim, have = v, have|recTime
		case "chunk":
			chunk, have = v, have|recChunk
		default:
			if other == nil {
				other = k
			}
		}
	}
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
		if p := exact(recType|recTime0|recIndex|recDt|recTexts, 0, "type, time0, index, dt, texts"); p != nil {
			return p
		}
		return checkRun(time0, index, dt, texts, "texts")
	case `"tool-call-chunks"`:
		if p := exact(recType|recTime0|recIndex|recDt|recID|recArgs, recName, "type, time0, index, dt, id, name (optional), args"); p != nil {
			return p
		}
		if !nonEmptyString(id) {
			return mustBe("a non-empty string", id).in(".id")
		}
		if name != nil && !nonEmptyString(name) {
			return mustBe("a non-empty string (or absent)", name).in(".name")
		}
		return checkRun(time0, index, dt, args, "args")
	case `"chunk"`:
		if p := exact(recType|recTime|recChunk, 0, "type, time, chunk"); p != nil {
			return p
		}
		if _, ok := rawjson.Int(tim); !ok {
			return mustBe("a safe integer", tim).in(".time")
		}
		if p := checkChunk(chunk); p != nil {
			return p.in(".chunk")
		}
		return nil
	}
	if typ == nil {
		return newProblem("is missing (a stream record is text-chunks, reasoning-chunks, tool-call-chunks or chunk)").in(".type")
	}
	return newProblem("%s is not a stream record type (text-chunks, reasoning-chunks, tool-call-chunks, chunk)", clip(typ)).in(".type")
}

// checkRun checks the members of a run of deltas: time0, index, the gaps
// and the pieces (texts or args).
func checkRun(time0, index, dt, pieces []byte, piecesName string) *problem {
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
	n := 0
	for it := rawjson.Array(pieces); ; n++ {
		v, ok := it.Next()
		if !ok {
			break
		}
		if !isString(v) {
			return mustBe("a string", v).at(n).in("." + piecesName)
		}
	}
	if n == 0 {
		return newProblem("must not be empty").in("." + piecesName)
	}
	if len(dt) == 0 || dt[0] != '[' {
		return mustBe("an array of time gaps", dt).in(".dt")
	}
	gaps := 0
	for it := rawjson.Array(dt); ; gaps++ {
		v, ok := it.Next()
		if !ok {
			break
		}
		d, ok := rawjson.Int(v)
		if !ok {
			return mustBe("a safe integer", v).at(gaps).in(".dt")
		}
		if t += d; t > rawjson.MaxSafeInt || t < -rawjson.MaxSafeInt {
			return newProblem("puts a member's time beyond a safe integer").at(gaps).in(".dt")
		}
	}
	if gaps != n-1 {
		return newProblem("holds %d time gaps for %d %s: one fewer than the %s", gaps, n, piecesName, piecesName).in(".dt")
	}
	return nil
}

// checkChunk checks the chunk of a "chunk" record: one of the stream
// chunk types, with its members.
func checkChunk(raw []byte) *problem {
	if len(raw) == 0 || raw[0] != '{' {
		return mustBe("a stream chunk (an object)", raw)
	}
	typ := rawjson.Get(raw, "type")
	s := chunkShapes[string(unquoted(typ))]
	if s == nil {
		if typ == nil {
			return newProblem("is missing (a chunk is one of %s)", joinPlain(chunkTypes)).in(".type")
		}
		return newProblem("%s is not a stream chunk type (%s)", clip(typ), joinPlain(chunkTypes)).in(".type")
	}
	return s.checkObject(raw)
}

func joinPlain(vs []string) string {
	var b bytes.Buffer
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(v)
	}
	return b.String()
}
