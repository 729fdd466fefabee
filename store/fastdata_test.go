package store

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// checkFast decodes data with the fast path and with encoding/json: when
// the fast path takes the data, the results must be equal and json must
// accept it too.
func checkFast[T any](t *testing.T, data string, fast func([]byte, *T) bool) bool {
	t.Helper()
	var got, want T
	ok := fast([]byte(data), &got)
	err := json.Unmarshal([]byte(data), &want)
	if d, isTitle := any(&want).(*TitleData); isTitle {
		// The replay does not keep the seqs; the fast path only checks
		// them as json.Unmarshal would.
		d.MessageSeqs = nil
	}
	if ok && (err != nil || !reflect.DeepEqual(got, want)) {
		t.Errorf("%T from %s: fast %#v, json %#v (%v)", got, data, got, want, err)
	}
	return ok
}

func checkAllFast(t *testing.T, data string) (taken int) {
	t.Helper()
	known := []SessionInfo{{ID: "s1"}, {ID: `a\\b`}}
	for _, ok := range []bool{
		checkFast(t, data, fastCreated),
		checkFast(t, data, fastTitle),
		checkFast(t, data, fastSessionStarted),
		checkFast(t, data, func(b []byte, d *TurnStartedData) bool { return fastTurn(b, &d.SessionID, &d.Turn, nil, known) }),
		checkFast(t, data, func(b []byte, d *TurnEndedData) bool { return fastTurn(b, &d.SessionID, &d.Turn, &d.Outcome, known) }),
	} {
		if ok {
			taken++
		}
	}
	return taken
}

func TestFastDataMatchesJSON(t *testing.T) {
	for _, data := range []string{
		`{"cwd":"/w","agents":["coder"],"models":["m1","m2"]}`,
		`{"cwd":"/w","agents":[],"models":null,"title":"T"}`,
		`{"cwd":"/w","agents":["a",null],"models":["m"]}`,
		`{"cwd":"/w\u00e9","agents":["a"]}`,
		`{"cwd":null}`,
		`{"Cwd":"/w"}`,
		`{"cwd":"/a","CWD":"/b"}`,
		`{"cwd":"/a","cwd":"/b"}`,
		`{"cwd":1}`,
		`{"agents":"coder"}`,
		`{"agents":[1]}`,
		`{"title":"x","messageSeqs":[1,2,3]}`,
		`{"title":"x","messageSeqs":[1.5]}`,
		`{"title":"x","messageSeqs":["1"]}`,
		`{"title":"x","messageSeqs":null}`,
		`{"title":"x","messageSeqs":[]}`,
		`{"title":"é ü \"q\""}`,
		`{"sessionId":"s1","agent":"coder","model":"m","parentSession":"p"}`,
		`{"sessionId":"s1","turn":3}`,
		`{"sessionId":"s2","turn":-0}`,
		`{"sessionId":"s1","turn":1e2}`,
		`{"sessionId":"s1","turn":1.0}`,
		`{"sessionId":"s1","turn":9223372036854775807}`,
		`{"sessionId":"s1","turn":9223372036854775808}`,
		`{"sessionId":"s1","turn":-9223372036854775808}`,
		`{"sessionId":"s1","turn":null,"outcome":"completed"}`,
		`{"sessionId":"s1","turn":"1"}`,
		`{"sessionId":"a\\b","turn":1}`,
		`{"sessionId":"a\\\\b","turn":1}`,
		`{"sessionId":true}`,
		`{"sessionId":{"x":1}}`,
		`{"unknown":1}`,
		`{}`,
		` { "sessionId" : "s1" , "turn" : 2 } `,
		`null`,
		`[]`,
		`"x"`,
		`3`,
	} {
		checkAllFast(t, data)
	}
}

// TestFastDataRandom feeds objects of known, differently cased and unknown
// members with values of every kind.
func TestFastDataRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"cwd", "agents", "models", "title", "messageSeqs", "sessionId", "agent", "model",
		"parentSession", "turn", "outcome", "SessionId", "TURN", "other"}
	value := func() string {
		switch rng.IntN(12) {
		case 0:
			return "null"
		case 1:
			return fmt.Sprint(rng.Int64N(1000) - 500)
		case 2:
			return "1.5"
		case 3:
			return "true"
		case 4:
			return `"plain"`
		case 5:
			b, _ := json.Marshal("<tag> & \"q\" \u2028 é")
			return string(b)
		case 6:
			return `["a","b"]`
		case 7:
			return `[1,2,[3]]`
		case 8:
			return `[]`
		case 9:
			return `{"k":"v"}`
		case 10:
			return `"s1"`
		default:
			return `["x",null]`
		}
	}
	taken := 0
	for range 20000 {
		var b strings.Builder
		b.WriteByte('{')
		for k := range rng.IntN(5) {
			if k > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%q:%s", keys[rng.IntN(len(keys))], value())
		}
		b.WriteByte('}')
		taken += checkAllFast(t, b.String())
	}
	if taken == 0 {
		t.Fatal("the fast path took nothing")
	}
}
