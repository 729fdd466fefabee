package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/BurntSushi/toml"
)

// The TOML decoder's memory grows with every key's depth and path length, so
// the configuration is measured in one constant-memory pass first. Each key
// part and each array is one level of depth; a key path is measured as
// written, its table header's parts included.
const (
	MaxRuntimeConfigBytes    = 256 << 10
	MaxRuntimeConfigDepth    = 32
	MaxRuntimeConfigKeyBytes = 256
)

// DecodeRuntimeConfig reads at most MaxRuntimeConfigBytes from r, checks the
// limits and only then decodes into v; errors name path and the line.
func DecodeRuntimeConfig(path string, r io.Reader, v any) error {
	data, err := io.ReadAll(io.LimitReader(r, MaxRuntimeConfigBytes+1))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxRuntimeConfigBytes {
		line := 1 + bytes.Count(data[:MaxRuntimeConfigBytes], []byte{'\n'})
		return fmt.Errorf("%s: %w", path, &ConfigLimitError{Line: line, Reason: fmt.Sprintf("larger than %d bytes (256 KiB), the limit for a runtime configuration", MaxRuntimeConfigBytes)})
	}
	s := shapeScanner{b: data, maxDepth: MaxRuntimeConfigDepth, maxKey: MaxRuntimeConfigKeyBytes}
	if err := s.scan(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if _, err := toml.Decode(string(data), v); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return fmt.Errorf("%s: line %d: %s", path, pe.Position.Line, pe.Message)
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// shapeScanner measures depths and key paths without decoding; on invalid
// TOML it moves on a byte at a time, since the decoder stops there anyway.
type shapeScanner struct {
	b                []byte
	i, line          int
	maxDepth, maxKey int
	deepest, longest int
	// stack holds the open arrays and inline tables, at most maxDepth.
	stack []container
	table container // the current [table]
}

type container struct {
	array bool
	depth int
	key   int // bytes of the key path
}

type shapeState int

const (
	stStatement shapeState = iota // a line at the top level
	stKey                         // a key in an inline table
	stValue                       // a value
	stAfter                       // after a value or a header
)

// ConfigLimitError is a configuration beyond one of the limits.
type ConfigLimitError struct {
	Line   int
	Reason string
}

func (e *ConfigLimitError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

func (s *shapeScanner) fail(line int, format string, args ...any) error {
	return &ConfigLimitError{Line: line, Reason: fmt.Sprintf(format, args...)}
}

// node records a value (or table) at depth with a key path of key bytes.
func (s *shapeScanner) node(line, depth, key int) error {
	s.deepest = max(s.deepest, depth)
	s.longest = max(s.longest, key)
	if depth > s.maxDepth {
		return s.fail(line, "nested deeper than %d levels of tables and arrays (dotted keys and inline tables count)", s.maxDepth)
	}
	if key > s.maxKey {
		return s.fail(line, "a key path longer than %d bytes", s.maxKey)
	}
	return nil
}

func (s *shapeScanner) scan() error {
	s.line = 1
	// The decoder skips a byte order mark, UTF-16's too.
	for _, bom := range []string{"\xff\xfe", "\xfe\xff", "\xef\xbb\xbf"} {
		if bytes.HasPrefix(s.b, []byte(bom)) {
			s.i = len(bom)
			break
		}
	}
	st := stStatement
	var value container // the depth and key path of the value expected in stValue
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch c {
		case ' ', '\t', '\r':
			s.i++
			continue
		case '\n':
			s.i++
			s.line++
			if len(s.stack) == 0 {
				st = stStatement
			}
			continue
		case '#':
			for s.i < len(s.b) && s.b[s.i] != '\n' {
				s.i++
			}
			continue
		}
		switch st {
		case stStatement, stKey:
			line := s.line
			base := s.table
			if st == stKey {
				if c == '}' {
					s.i++
					s.pop()
					st = stAfter
					continue
				}
				base = s.stack[len(s.stack)-1]
			} else if c == '[' {
				s.i++
				aot := s.i < len(s.b) && s.b[s.i] == '['
				if aot {
					s.i++
				}
				// A table of an array of tables is at the array's level.
				parts, key := s.key()
				if err := s.node(line, parts, key); err != nil {
					return err
				}
				s.table = container{depth: parts, key: key}
				s.skip(']')
				if aot {
					s.skip(']')
				}
				st = stAfter
				continue
			}
			parts, key := s.key()
			if parts == 0 {
				s.i++ // not a key: the decoder refuses it
				st = stAfter
				continue
			}
			value = container{depth: base.depth + parts, key: base.key + key}
			if err := s.node(line, value.depth, value.key); err != nil {
				return err
			}
			st = s.equals()
		case stValue:
			switch c {
			case '[', '{':
				s.i++
				value.array = c == '['
				s.stack = append(s.stack, value)
				var err error
				if st, value, err = s.inside(value); err != nil {
					return err
				}
			case ']', '}': // an empty array, or a trailing comma
				s.i++
				s.pop()
				st = stAfter
			case '"', '\'':
				s.str()
				st = stAfter
			default:
				s.bare()
				st = stAfter
			}
		case stAfter:
			s.i++
			switch c {
			case ',':
				if len(s.stack) == 0 {
					continue
				}
				var err error
				if st, value, err = s.inside(s.stack[len(s.stack)-1]); err != nil {
					return err
				}
			case ']', '}':
				s.pop()
			}
		}
	}
	return nil
}

// inside is what comes next inside the open container top: a key of an
// inline table, or an array's element, whose depth it checks.
func (s *shapeScanner) inside(top container) (shapeState, container, error) {
	if !top.array {
		return stKey, container{}, nil
	}
	v := container{depth: top.depth + 1, key: top.key}
	return stValue, v, s.element(v)
}

// element checks the depth of an array's next element, if any.
func (s *shapeScanner) element(v container) error {
	j := s.i
	for j < len(s.b) {
		switch s.b[j] {
		case ' ', '\t', '\r', '\n':
			j++
			continue
		case '#':
			for j < len(s.b) && s.b[j] != '\n' {
				j++
			}
			continue
		case ']':
			return nil
		}
		break
	}
	if j == len(s.b) {
		return nil
	}
	line := s.line + bytes.Count(s.b[s.i:j], []byte{'\n'})
	return s.node(line, v.depth, v.key)
}

func (s *shapeScanner) pop() {
	if len(s.stack) > 0 {
		s.stack = s.stack[:len(s.stack)-1]
	}
}

// equals consumes the '=' after a key and says what comes next.
func (s *shapeScanner) equals() shapeState {
	s.blank()
	if s.i < len(s.b) && s.b[s.i] == '=' {
		s.i++
		return stValue
	}
	return stAfter
}

func (s *shapeScanner) skip(c byte) {
	s.blank()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
	}
}

func (s *shapeScanner) blank() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t') {
		s.i++
	}
}

// key reads a key, dotted or not, and returns its parts and their bytes as
// written.
func (s *shapeScanner) key() (parts, n int) {
	for {
		s.blank()
		if s.i >= len(s.b) {
			return parts, n
		}
		start := s.i
		switch s.b[s.i] {
		case '"', '\'':
			s.str()
		default:
			for s.i < len(s.b) && !keyStop(s.b[s.i]) {
				s.i++
			}
		}
		if s.i == start {
			return parts, n
		}
		parts++
		n += s.i - start
		s.blank()
		if s.i >= len(s.b) || s.b[s.i] != '.' {
			return parts, n
		}
		s.i++
	}
}

func keyStop(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '.', '=', '[', ']', '{', '}', ',', '#', '"', '\'':
		return true
	}
	return false
}

// bare skips a number, a boolean or a date; at least one byte.
func (s *shapeScanner) bare() {
	s.i++
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n', ',', '[', ']', '{', '}', '#', '"', '\'':
			return
		}
		s.i++
	}
}

// str skips a string of any of the four kinds, counting lines; a one-line
// string ends at its line's end at the latest.
func (s *shapeScanner) str() {
	q := s.b[s.i]
	if bytes.HasPrefix(s.b[s.i:], []byte{q, q, q}) {
		s.i += 3
		for s.i < len(s.b) {
			c := s.b[s.i]
			switch {
			case c == '\n':
				s.line++
			case c == '\\' && q == '"':
				if s.i+1 < len(s.b) && s.b[s.i+1] == '\n' {
					s.line++
				}
				s.i = min(s.i+2, len(s.b))
				continue
			case c == q && bytes.HasPrefix(s.b[s.i:], []byte{q, q, q}):
				s.i += 3
				// Up to two more quotes belong to the string.
				for k := 0; k < 2 && s.i < len(s.b) && s.b[s.i] == q; k++ {
					s.i++
				}
				return
			}
			s.i++
		}
		return
	}
	s.i++
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '\n':
			return
		case c == '\\' && q == '"':
			if s.i+1 < len(s.b) && s.b[s.i+1] != '\n' {
				s.i++
			}
		case c == q:
			s.i++
			return
		}
		s.i++
	}
}
