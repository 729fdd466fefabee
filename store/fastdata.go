package store

import (
	"bytes"

	"github.com/convkit/convkit/internal/rawjson"
)

// Listing and reindex replay conversation logs, where encoding/json cost more
// than reading, so the small flat events every conversation holds are
// decoded through rawjson (a rename, rare, goes through encoding/json). The
// fast path takes only members it knows by exact name with plain values and
// otherwise gives up, leaving json.Unmarshal the same result, errors included.

// fastMembers calls set for each member of the event data with its key and
// raw value (nil for null); set reports whether it took the member.
func fastMembers(data []byte, set func(key, v []byte) bool) bool {
	ok := true
	err := rawjson.EachMember(data, func(m rawjson.Member) bool {
		v := m.Value
		if isNull(v) {
			// json.Unmarshal leaves the field as it is (a slice: nil).
			v = nil
		}
		ok = set(m.Key, v)
		return ok
	})
	return ok && err == nil
}

func isNull(v []byte) bool { return string(v) == "null" }

// fastString sets *dst from a JSON string; v nil (null) leaves it.
func fastString(v []byte, dst *string) bool { return fastValue(v, dst, rawjson.String) }

func fastValue[T any](v []byte, dst *T, parse func([]byte) (T, bool)) bool {
	if v == nil {
		return true
	}
	x, ok := parse(v)
	if ok {
		*dst = x
	}
	return ok
}

// fastSessionID is fastString reusing the string of a known session's id,
// which turns repeat.
func fastSessionID(v []byte, dst *string, known []SessionInfo) bool {
	if v == nil || len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
		return fastString(v, dst)
	}
	s := v[1 : len(v)-1]
	for i := range known {
		if known[i].ID == string(s) {
			*dst = known[i].ID
			return true
		}
	}
	return fastString(v, dst)
}

// fastInt sets *dst from a safe JSON integer; v nil (null) leaves it.
func fastInt(v []byte, dst *int64) bool { return fastValue(v, dst, rawjson.Int) }

// fastArray calls elem for each element of a JSON array; null reports
// isNull, for the caller to reset its slice as json.Unmarshal would.
func fastArray(v []byte, elem func([]byte) bool) (isNull, ok bool) {
	if v == nil {
		return true, true
	}
	ok = true
	err := rawjson.EachElement(v, func(_ int, e []byte) bool {
		ok = elem(e)
		return ok
	})
	return false, ok && err == nil
}

// fastStrings sets *dst from an array of plain strings.
func fastStrings(v []byte, dst *[]string) bool {
	list := []string{}
	null, ok := fastArray(v, func(e []byte) bool {
		var s string
		if isNull(e) {
			// json.Unmarshal leaves a null element "".
			list = append(list, "")
			return true
		}
		if !fastString(e, &s) {
			return false
		}
		list = append(list, s)
		return true
	})
	switch {
	case !ok:
		return false
	case null:
		*dst = nil
	default:
		*dst = list
	}
	return true
}

// fastInts checks an array of integers (the value is not kept).
func fastInts(v []byte) bool {
	_, ok := fastArray(v, func(e []byte) bool {
		var n int64
		return !isNull(e) && fastInt(e, &n)
	})
	return ok
}

func fastCreated(data []byte, d *CreatedData) bool {
	return fastMembers(data, func(k, v []byte) bool {
		switch string(k) {
		case "cwd":
			return fastString(v, &d.Cwd)
		case "agents":
			return fastStrings(v, &d.Agents)
		case "models":
			return fastStrings(v, &d.Models)
		case "title":
			return fastString(v, &d.Title)
		}
		return false
	})
}

func fastTitle(data []byte, d *TitleData) bool {
	return fastMembers(data, func(k, v []byte) bool {
		switch string(k) {
		case "title":
			return fastString(v, &d.Title)
		case "messageSeqs":
			// Not kept, only checked.
			return v == nil || fastInts(v)
		}
		return false
	})
}

func fastSessionStarted(data []byte, d *SessionStartedData) bool {
	return fastMembers(data, func(k, v []byte) bool {
		switch string(k) {
		case "sessionId":
			return fastString(v, &d.SessionID)
		case "agent":
			return fastString(v, &d.Agent)
		case "model":
			return fastString(v, &d.Model)
		case "parentSession":
			return fastString(v, &d.ParentSession)
		}
		return false
	})
}

// fastTurn decodes turn/started (outcome nil) and turn/ended.
func fastTurn(data []byte, sessionID *string, turn *int64, outcome *string, known []SessionInfo) bool {
	return fastMembers(data, func(k, v []byte) bool {
		switch string(k) {
		case "sessionId":
			return fastSessionID(v, sessionID, known)
		case "turn":
			return fastInt(v, turn)
		case "outcome":
			return outcome != nil && fastString(v, outcome)
		}
		return false
	})
}
