package upgrade

import (
	"fmt"
	"slices"

	"github.com/convkit/convkit/internal/rawjson"
)

// v1v2 is the v1→v2 step (docs/UPGRADE.md, "v1 → v2"): a model call's
// chunks become the stream of the answer that claims them, or of an
// assistant/attempt. It holds at most one step of one turn back.
type v1v2 struct {
	info       srcInfo
	inCount    int64
	lastTime   int64
	haveTime   bool
	queue      []*slot
	head       int
	groups     map[gkey]*group
	next       int64
	m          seqMap
	out        []*event
	restart    restartTracker
	markerDone bool
}

type gkey struct{ turn, step int64 }

type group struct {
	key              gkey
	turnRaw, stepRaw []byte
	seqs             []int64
	sb               streamBuilder
	lastTime         int64
	terminal         bool
	resolved         bool
	claimed          bool
	slot             *slot
}

// slot is an event of the output queue, or an attempt's place.
type slot struct {
	ev     *event
	origin int64 // source seq; -1 for an inserted event
	grp    *group
	dead   bool
}

func (s *v1v2) enqueue(e *event, origin int64) {
	s.queue = append(s.queue, &slot{ev: e, origin: origin})
}

func (s *v1v2) resolve(g *group, claimed bool) {
	g.resolved, g.claimed = true, claimed
	if s.groups[g.key] == g {
		delete(s.groups, g.key)
	}
}

// resolveTurn settles the open attempts of turn as unclaimed (of every
// turn for -1).
func (s *v1v2) resolveTurn(turn int64) {
	for k, g := range s.groups {
		if turn < 0 || k.turn == turn {
			s.resolve(g, false)
		}
	}
}

func endSeedMarker(time int64) *event {
	return &event{typ: "session/end-seed", time: time, data: []byte(`{"inherited":true}`)}
}

func (s *v1v2) transform(e *event) ([]*event, error) {
	s.out = s.out[:0]
	if !v0Types[e.typ] {
		return nil, refusal("format v1 contains unknown event type %s at seq %d", jsonString(e.typ), e.seq)
	}
	s.inCount = e.seq + 1
	s.lastTime, s.haveTime = e.time, true
	if s.info.seeded && !s.markerDone && e.seq == s.info.seedLength {
		s.resolveTurn(-1)
		s.markerDone = true
		if e.typ == "session/end-seed" {
			e.data = []byte(`{"inherited":true}`)
		} else {
			s.enqueue(endSeedMarker(e.time), -1)
		}
	}
	if t, ok := s.restart.observe(e); ok {
		s.resolveTurn(t)
		s.enqueue(interruptedTurnEnd(t, e.time), -1)
	}
	var err error
	switch e.typ {
	case "assistant/chunk":
		err = s.chunk(e)
	case "assistant/message":
		err = s.message(e)
	case "step/end", "llm/retry", "llm/retry-started":
		d := e.data
		turn, ok1 := count(rawjson.Get(d, "turn"))
		step, ok2 := count(rawjson.Get(d, "step"))
		if g := s.groups[gkey{turn, step}]; ok1 && ok2 && g != nil {
			s.resolve(g, false)
		}
	case "turn/end":
		if turn, ok := count(rawjson.Get(e.data, "turn")); ok {
			s.resolveTurn(turn)
		}
	case "turn/start", "step/start":
		// What is still open is an attempt: at most a step is held back.
		s.resolveTurn(-1)
	}
	if err != nil {
		return nil, err
	}
	if e.typ != "assistant/chunk" { // consumed
		s.enqueue(e, e.seq)
	}
	return s.out, s.flush()
}

func (s *v1v2) chunk(e *event) error {
	d := e.chunk
	var raw, turnRaw, stepRaw []byte
	if d != nil {
		turnRaw, stepRaw = d.turn, d.step
	} else {
		o, err := parseObject(e.data)
		var c []byte
		if err == nil {
			turnRaw, stepRaw, c = o.get("turn"), o.get("step"), o.get("chunk")
		}
		if !isObj(c) {
			return corrupt("assistant/chunk at seq %d must carry turn, step and chunk", e.seq)
		}
		var ok bool
		if d, ok = parseDelta(c); !ok {
			raw = c
		}
	}
	turn, ok1 := count(turnRaw)
	step, ok2 := count(stepRaw)
	if !ok1 || !ok2 {
		return corrupt("assistant/chunk at seq %d must carry integer turn and step", e.seq)
	}
	key := gkey{turn, step}
	g := s.groups[key]
	if g != nil && g.terminal {
		s.resolve(g, false)
		g = nil
	}
	if g == nil {
		g = &group{key: key, turnRaw: turnRaw, stepRaw: stepRaw}
		s.groups[key] = g
	}
	g.seqs = append(g.seqs, e.seq)
	if d != nil {
		g.sb.addDelta(e.time, d)
	} else {
		g.sb.addRaw(e.time, raw)
		if rawjson.StringIs(rawjson.Get(raw, "type"), "finish") {
			g.terminal = true
		}
	}
	g.lastTime = e.time
	s.m.broken = true // the chunk is consumed
	if g.slot != nil {
		g.slot.dead = true
	}
	g.slot = &slot{grp: g, origin: -1}
	s.queue = append(s.queue, g.slot)
	return nil
}

func (s *v1v2) message(e *event) error {
	d, err := parseObject(e.data)
	if err != nil {
		return corrupt("assistant/message at seq %d: data must be an object", e.seq)
	}
	turn, ok1 := count(d.get("turn"))
	step, ok2 := count(d.get("step"))
	if !ok1 || !ok2 {
		return corrupt("assistant/message at seq %d must carry integer turn and step", e.seq)
	}
	g := s.groups[gkey{turn, step}]
	stream := []byte("[]")
	switch {
	case e.sources != nil && len(e.sources) == 0:
		if g != nil {
			s.resolve(g, false)
		}
	case len(e.sources) > 0:
		if g == nil || !slices.Equal(g.seqs, e.sources) {
			return refusal("assistant/message %d chunk provenance is not one complete ordered attempt", e.seq)
		}
		stream = g.sb.bytes()
		s.resolve(g, true)
	default:
		if g != nil {
			stream = g.sb.bytes()
			s.resolve(g, true)
		}
	}
	e.sources = nil
	d.set("stream", stream)
	e.data = d.bytes()
	return nil
}

// flush emits the queue's settled head.
func (s *v1v2) flush() error {
	defer s.compact()
	for ; s.head < len(s.queue); s.head++ {
		sl := s.queue[s.head]
		switch {
		case sl.dead:
		case sl.grp != nil:
			g := sl.grp
			if !g.resolved {
				return nil
			}
			if !g.claimed {
				d := fmt.Appendf(nil, `{"turn":%s,"step":%s,"stream":%s}`, g.turnRaw, g.stepRaw, g.sb.bytes())
				s.out = append(s.out, &event{typ: "assistant/attempt", seq: s.next, time: g.lastTime, data: d})
				s.next++
			}
		default:
			ev := sl.ev
			if sl.origin >= 0 {
				if err := remapRefs(ev, &s.m, func(ref int64) error {
					return refusal("%s at seq %d references consumed assistant/chunk %d", ev.typ, ev.seq, ref)
				}); err != nil {
					return err
				}
				s.m.add(sl.origin, s.next)
			}
			ev.seq = s.next
			s.next++
			s.out = append(s.out, ev)
		}
		s.queue[s.head] = nil
	}
	return nil
}

func (s *v1v2) compact() {
	if s.head == len(s.queue) {
		s.queue, s.head = s.queue[:0], 0
	} else if s.head > 256 && s.head*2 > len(s.queue) {
		n := copy(s.queue, s.queue[s.head:])
		clear(s.queue[n:])
		s.queue, s.head = s.queue[:n], 0
	}
}

func (s *v1v2) finish() ([]*event, error) {
	s.out = s.out[:0]
	if s.info.seeded && !s.markerDone {
		if s.info.seedLength > s.inCount {
			return nil, corrupt("format v1 seedLength %d exceeds its %d events", s.info.seedLength, s.inCount)
		}
		s.resolveTurn(-1)
		t := s.info.createdAt
		if s.haveTime {
			t = s.lastTime
		}
		s.enqueue(endSeedMarker(t), -1)
		s.markerDone = true
	}
	s.resolveTurn(-1)
	if err := s.flush(); err != nil {
		return nil, err
	}
	return s.out, nil
}
