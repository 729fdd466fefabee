package convlog

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/FORMAT.md's table of event types from the schemas")

// The table of event types in docs/FORMAT.md is written from the schemas
// (eventTypes), between these lines.
const (
	tableStart = "<!-- event types: written from convlog/schemas.go by go test ./convlog -run TestFormatDocListsEveryType -update-docs -->"
	tableEnd   = "<!-- end of event types -->"
)

func typeDoc(fl *field) string {
	switch fl.t {
	case vAny:
		return "any"
	case vStr:
		return "string"
	case vNonEmpty:
		return "string≠\"\""
	case vLine:
		return "one-line string"
	case vAbsPath:
		return "absolute path"
	case vInt:
		return "int"
	case vCount:
		return "int≥0"
	case vPos:
		return "int≥1"
	case vNum:
		return "number"
	case vBool:
		return "bool"
	case vTrue:
		return "true"
	case vIntOrNull:
		return "int\\|null"
	case vObj:
		return "object"
	case vArr:
		return "array"
	case vStrs:
		return "string[]"
	case vCounts:
		return "int≥0[]"
	case vEnum:
		q := make([]string, len(fl.enum))
		for i, e := range fl.enum {
			q[i] = `"` + e + `"`
		}
		return strings.Join(q, "\\|")
	case vShape:
		return fl.sub.name
	case vShapes:
		return fl.sub.name + "[]"
	case vBlocks:
		return "blocks"
	case vBlock:
		return "block"
	case vStream:
		return "stream"
	case vMessage:
		return slotNames[fl.slot]
	case vMessages:
		return slotNames[fl.slot] + "[]"
	case vNever:
		return "absent"
	}
	return "?"
}

func shapeDoc(s *shape) string {
	var parts []string
	for i := range s.fields {
		fl := &s.fields[i]
		if fl.t == vNever {
			parts = append(parts, fl.name+": refused")
			continue
		}
		opt := ""
		if fl.opt {
			opt = "?"
		}
		parts = append(parts, fmt.Sprintf("%s%s: %s", fl.name, opt, typeDoc(fl)))
	}
	doc := strings.Join(parts, ", ")
	if s.closed {
		doc += " (no other member)"
	}
	return doc
}

// formatTable is the table of every event type.
func formatTable() string {
	names := make([]string, 0, len(eventTypes))
	for n := range eventTypes {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		la, lb := eventTypes[a].log, eventTypes[b].log
		if la != lb {
			return int(la) - int(lb)
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	b.WriteString("| type | log | kind | data |\n|---|---|---|---|\n")
	for _, n := range names {
		sc := eventTypes[n]
		kind := "log-only"
		if sc.msg != 0 {
			kind = "surface"
		}
		if sc.plugin {
			kind = "log-only, plugin"
		}
		data := "the user message itself"
		if sc.data != nil {
			data = shapeDoc(sc.data)
			if data == "" {
				data = "{}"
			}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", n, logNames[sc.log], kind, data)
	}
	b.WriteString("\n| shape | members |\n|---|---|\n")
	for _, s := range []*shape{usageShape, failureShape, toolErrorShape, turnEndReasonShape, cancelShape, requestHeaderShape,
		configShape, adapterDefaultsShape, toolSchemaShape, rangeShape, titleSrcShape, routeShape, offloadShape, inheritedShape,
		teamMessageShape, imageAttachmentShape, fileAttachmentShape, finishShape,
		systemSourceShape, modelSourceShape, toolSourceShape, checkpointSourceShape} {
		fmt.Fprintf(&b, "| %s | %s |\n", s.name, shapeDoc(s))
	}
	for _, s := range chunkShapes {
		fmt.Fprintf(&b, "| chunk %s | %s |\n", s.name, shapeDoc(s))
	}
	return b.String()
}

// TestFormatDocListsEveryType: docs/FORMAT.md's table of event types is
// the schemas', every type of the registry in it with its log, its kind
// and its members.
func TestFormatDocListsEveryType(t *testing.T) {
	const doc = "../docs/FORMAT.md"
	raw, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	i, j := strings.Index(s, tableStart), strings.Index(s, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no table of event types (between %q and %q)", doc, tableStart, tableEnd)
	}
	want := tableStart + "\n\n" + formatTable() + "\n"
	if got := s[i:j]; got != want {
		if *updateDocs {
			if err := os.WriteFile(doc, []byte(s[:i]+want+s[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s's table of event types is not the schemas' (go test ./convlog -run %s -update-docs rewrites it)", doc, t.Name())
	}
}
