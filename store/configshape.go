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
	maxRuntimeConfigBytes    = 256 << 10
	maxRuntimeConfigDepth    = 32
	maxRuntimeConfigKeyBytes = 256
)

// DecodeRuntimeConfig reads at most 256 KiB from r, checks the
// limits and only then decodes into v; errors name path and the line.
func DecodeRuntimeConfig(path string, r io.Reader, v any) error {
	data, err := io.ReadAll(io.LimitReader(r, maxRuntimeConfigBytes+1))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxRuntimeConfigBytes {
		line := 1 + bytes.Count(data[:maxRuntimeConfigBytes], []byte{'\n'})
		return fmt.Errorf("%s: %w", path, &configLimitError{Line: line, Reason: fmt.Sprintf("larger than %d bytes (256 KiB), the limit for a runtime configuration", maxRuntimeConfigBytes)})
	}
	s := shapeScanner{b: data, maxDepth: maxRuntimeConfigDepth, maxKey: maxRuntimeConfigKeyBytes}
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
}

// level is the depth of a table, key or array and the bytes of its key path.
type level struct{ depth, key int }

// configLimitError is a configuration beyond one of the limits.
type configLimitError struct {
	Line   int
	Reason string
}

func (e *configLimitError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

func (s *shapeScanner) fail(line int, format string, args ...any) error {
	return &configLimitError{Line: line, Reason: fmt.Sprintf(format, args...)}
}

// node records a value (or table) at v.
func (s *shapeScanner) node(line int, v level) error {
	s.deepest = max(s.deepest, v.depth)
	s.longest = max(s.longest, v.key)
	if v.depth > s.maxDepth {
		return s.fail(line, "nested deeper than %d levels of tables and arrays (dotted keys and inline tables count)", s.maxDepth)
	}
	if v.key > s.maxKey {
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
	var table level
	for s.space(true); s.i < len(s.b); s.space(true) {
		line := s.line
		if s.b[s.i] == '[' {
			// A table of an array of tables ([[name]]) is at the array's level.
			s.i++
			if s.i < len(s.b) && s.b[s.i] == '[' {
				s.i++
			}
			parts, key := s.key()
			table = level{parts, key}
			if err := s.node(line, table); err != nil {
				return err
			}
		} else if _, err := s.keyValue(line, table, true); err != nil {
			return err
		}
		// The rest of the line is the decoder's to refuse.
		for s.i < len(s.b) && s.b[s.i] != '\n' {
			s.i++
		}
	}
	return nil
}

// keyValue reads a key below base and its value, which at the top level
// starts on the key's line; closed: the value closed the container.
func (s *shapeScanner) keyValue(line int, base level, top bool) (closed bool, err error) {
	parts, key := s.key()
	if parts == 0 {
		s.i++ // not a key: the decoder refuses it
		return false, nil
	}
	v := level{base.depth + parts, base.key + key}
	if err := s.node(line, v); err != nil {
		return false, err
	}
	s.blank()
	if s.i >= len(s.b) || s.b[s.i] != '=' {
		return false, nil
	}
	s.i++
	if s.space(!top); s.i >= len(s.b) || s.b[s.i] == '\n' {
		return false, nil
	}
	return s.value(v)
}

// value reads a value at v; closed: it was the end of its container (an
// empty array, or a trailing comma).
func (s *shapeScanner) value(v level) (closed bool, err error) {
	switch c := s.b[s.i]; c {
	case '[', '{':
		s.i++
		return false, s.container(v, c == '[')
	case ']', '}':
		s.i++
		return true, nil
	case '"', '\'':
		s.str()
	default:
		s.bare()
	}
	return false, nil
}

// container reads the elements of an array or the keys of an inline table
// at v, through its closing bracket.
func (s *shapeScanner) container(v level, array bool) error {
	for s.space(true); s.i < len(s.b); s.space(true) {
		var closed bool
		var err error
		line := s.line
		switch {
		case array:
			elem := level{v.depth + 1, v.key}
			if s.b[s.i] != ']' {
				err = s.node(line, elem)
			}
			if err == nil {
				closed, err = s.value(elem)
			}
		case s.b[s.i] == '}':
			s.i++
			return nil
		default:
			closed, err = s.keyValue(line, v, false)
		}
		if err != nil || closed {
			return err
		}
		// Up to the comma before the next element or key.
		for s.space(true); s.i < len(s.b); s.space(true) {
			c := s.b[s.i]
			s.i++
			if c == ',' {
				break
			}
			if c == ']' || c == '}' {
				return nil
			}
		}
	}
	return nil
}

// space skips blanks and comments, and newlines when nl.
func (s *shapeScanner) space(nl bool) {
	for ; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case '\n':
			if !nl {
				return
			}
			s.line++
		case ' ', '\t', '\r':
		case '#':
			for s.i+1 < len(s.b) && s.b[s.i+1] != '\n' {
				s.i++
			}
		default:
			return
		}
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
