package convlog

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/convkit/convkit/internal/rawjson"
)

// The stream check as it was before writerRecord and the admitted chunks:
// every record walked key by key (checkRecord); and a shape's check as it
// was before checkAt: its members found first, then checked, each nested
// object walked again (oracleKept). FuzzStreamCheck holds each to its
// oracle for one verdict, text and member.

func oracleStream(raw []byte) *problem {
	w := walk{b: raw}
	if !w.enterArray() {
		return mustBe("an array of stream records", raw)
	}
	var buf [8]member
	for k := 0; w.nextElem(); k++ {
		if p := checkRecord(&w, buf[:0]); p != nil {
			return p.at(k)
		}
	}
	return nil
}

// oracleKept is checkKept with each nested shape and block walked from
// its member's bytes, as a second walk.
func oracleKept(s *shape, obj []byte, ms []member) *problem {
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
		fl := &s.fields[i]
		var p *problem
		switch fl.t {
		case vShape:
			var buf [8]member
			w := walk{b: m.Value}
			if sobj, sms := w.members(buf[:0]); len(sobj) > 0 && sobj[0] == '{' {
				p = oracleKept(fl.sub, m.Value, sms)
			} else {
				p = newProblem("must be an object, not %s", jsonKind(m.Value))
			}
		default:
			p = fl.check(m.Value)
		}
		if p != nil {
			return p.in("." + fl.name)
		}
	}
	return s.checkRest(obj, ms, seen)
}

func sameProblem(a, b *problem) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.path == b.path && a.msg == b.msg && a.kind == b.kind
}

func FuzzStreamCheck(f *testing.F) {
	seeds := []string{
		`[{"type":"chunk","time":1788253200098,"chunk":{"type":"block-start","index":0,"blockType":"reasoning"}},{"type":"reasoning-chunks","time0":1788253200100,"index":0,"dt":[4,29],"texts":["a ","b","c"]},{"type":"chunk","time":1788253200153,"chunk":{"type":"block-end","index":0,"block":{"type":"reasoning","text":"a bc"}}},{"type":"tool-call-chunks","time0":1788253200158,"index":1,"dt":[17],"id":"call_1","name":"bash","args":["{\"command\":\"cat ","go.mod\"}"]},{"type":"chunk","time":1788253200178,"chunk":{"type":"block-end","index":1,"block":{"type":"tool-call","id":"call_1","name":"bash","arguments":"{}"}}},{"type":"chunk","time":1788253200181,"chunk":{"type":"usage","usage":{"inputTokens":10718,"outputTokens":308}}},{"type":"chunk","time":1788253200184,"chunk":{"type":"finish","reason":{"kind":"tool-calls"}}}]`,
		`[{"type":"chunk","time":1,"chunk":{"type":"finish","reason":{"kind":"error"}}}]`,
		`[{"type":"chunk","time":1,"chunk":{"type":"finish","reason":{"kind":"error","failure":{"code":"x","message":"y"}}}}]`,
		`[{"type":"chunk","time":1,"chunk":{"type":"block-start","index":0,"blockType":"tool-result"}}]`,
		`[{"type":"chunk","time":1.5,"chunk":{"type":"block-start","index":0,"blockType":"text"}}]`,
		`[{"type":"chunk","time":1,"chunk":{"index":0,"type":"block-start","blockType":"text"}}]`,
		`[{"type":"chunk","time":1,"chunk":{"type":"block-end","index":-1,"block":{"type":"text","text":"x"}}}]`,
		`[{"type":"chunk","time":1,"chunk":{"type":"block-end","index":0,"block":{"type":"image","attachment":{"attachmentId":"a","mediaType":"image/png","bytes":1,"width":1,"height":0}}}}]`,
		`[{"type":"text-chunks","time0":1,"index":0,"dt":[],"texts":["x"]}, {"type":"text-chunks","time0":1,"index":0,"dt":[1],"texts":["x"]}]`,
		`[{"type":"tool-call-chunks","time0":1,"index":0,"dt":[],"id":"","args":["x"]}]`,
		`[{"type":"tool-call-chunks","time0":1,"index":0,"dt":[],"id":"c","name":"","args":["x"]}]`,
		`[{"type":"text-chunks","time0":1,"index":0,"dt":[9007199254740991],"texts":["x",1]}]`,
		`[{"type":"chunk","time":1,"chunk":{"type":"usage","usage":{"inputTokens":1}},"x":1}]`,
		`[{"type":"chunk","time":1,"chunk":{"type":"tool-call-delta","index":0,"id":"","argumentsDelta":"x"}}]`,
	}
	if path := os.Getenv("CONVKIT_RULES_LOG"); path != "" {
		data, _ := os.ReadFile(path)
		for l := range bytes.Lines(data) {
			if s := rawjson.Get(rawjson.Get(l, "data"), "stream"); s != nil && len(seeds) < 200 {
				seeds = append(seeds, string(s))
			}
		}
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if rawjson.Valid(raw) != nil {
			return
		}
		// Twice: the second time the chunks the first admitted are taken as
		// checked.
		for range 2 {
			got, want := checkStream(raw), oracleStream(raw)
			if !sameProblem(got, want) {
				t.Fatalf("%s:\ncheckStream %+v\noracle      %+v", raw, got, want)
			}
		}
		if len(raw) > 0 && raw[0] == '{' {
			for _, s := range append(append([]*shape(nil), chunkShapes...), usageShape, finishShape, imageAttachmentShape) {
				var buf [8]member
				w := walk{b: raw}
				_, ms := w.members(buf[:0])
				if got, want := s.checkObject(raw), oracleKept(s, raw, ms); !sameProblem(got, want) {
					t.Fatalf("%s as %s:\ncheckObject %+v\noracle      %+v", raw, s.name, got, want)
				}
			}
		}
	})
}

// A request header admitted before is taken as checked by checkWalked (an
// event the caller built, its members not kept), and the rest of its data
// is still checked; a header never admitted is checked.
func TestAdmittedHeaderWalked(t *testing.T) {
	h := testHeader("s1")
	start := []Event{ev("turn/start", `{"turn":1}`), ev("step/start", `{"turn":1,"step":1}`)}
	header := `{"config":{"provider":"p","model":"m"},"tools":[{"name":"walked","description":"d","parameters":{}}]}`
	bad := `{"config":{"provider":"p","model":1},"tools":[]}`
	for _, c := range []struct {
		data, want string
	}{
		{`{"header":` + header + `,"reason":"initial"}`, ""},
		{`{"header":` + header + `,"reason":"later"}`, `data.reason: must be one of`},
		{`{"header":` + bad + `,"reason":"initial"}`, `data.header.config.model: must be a non-empty string`},
	} {
		v := NewValidator(h)
		evs := append(append([]Event(nil), start...), ev("request/header", c.data))
		var err error
		for i := range evs {
			evs[i].Seq = int64(i)
			if err = v.Check(&evs[i]); err != nil {
				break
			}
		}
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.data, err, c.want)
		}
	}
}
