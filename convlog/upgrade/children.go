package upgrade

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/rawjson"
	"github.com/convkit/convkit/internal/termtext"
)

// ChildFact is what a parent's v3→v4 step needs of a subagent child.
type ChildFact struct {
	ChildID        string
	ChildCreatedAt int64 // the child header's createdAt
	// DescriptorCount counts the child's own subagent/descriptor events
	// (after its inherited cut); Descriptor is the first one's data.
	DescriptorCount int
	Descriptor      json.RawMessage
	SourcePath      string // the child's log, named in refusals; may be empty
	// Warning: the child's log could not be read, so its catalog entry has
	// mode "unknown".
	Warning string
	file    fileIdentity // before its header was read
}

func (c *ChildFact) subject() string {
	if c.SourcePath != "" {
		return fmt.Sprintf("Session %s (raw log: %s)", c.ChildID, c.SourcePath)
	}
	return "Session " + c.ChildID
}

// catalogEntry is a validated subagent catalog fact.
type catalogEntry struct {
	childID   string
	createdAt int64
	mode      string
	label     string
	hasLabel  bool
	raw       []byte
}

// parseCatalogFact validates a subagent/catalog payload.
func parseCatalogFact(data []byte, subject string) (*catalogEntry, error) {
	bad := corrupt("%s requires a supported versioned catalog fact", subject)
	o, err := parseObject(data)
	if err != nil {
		return nil, bad
	}
	version := string(o.get("version"))
	c := &catalogEntry{raw: data}
	var ok bool
	if c.childID, ok = rawjson.String(o.get("childId")); !ok {
		return nil, bad
	}
	if c.mode, ok = rawjson.String(o.get("mode")); !ok {
		return nil, bad
	}
	if l := o.get("label"); l != nil {
		if c.label, ok = rawjson.String(l); !ok {
			return nil, bad
		}
		c.hasLabel = true
	}
	if version != "0" && version != "1" ||
		c.mode != "continuable" && c.mode != "one-shot" && c.mode != "unknown" ||
		version == "0" && c.mode == "unknown" ||
		c.mode == "continuable" && !c.hasLabel {
		return nil, bad
	}
	if c.createdAt, ok = count(o.get("childCreatedAt")); !ok {
		return nil, corrupt("%s: catalog child creation time must be a non-negative integer", subject)
	}
	return c, nil
}

// catalogFact is the catalog fact of the child's one own descriptor of
// version 1 to 3; nil otherwise (mode "unknown").
func (c *ChildFact) catalogFact() (*catalogEntry, error) {
	d := []byte(c.Descriptor)
	if c.DescriptorCount != 1 || !isObj(d) {
		return nil, nil
	}
	v := string(rawjson.Get(d, "version"))
	if v != "1" && v != "2" && v != "3" {
		return nil, nil
	}
	if !isStr(rawjson.Get(d, "provider")) {
		return nil, refusal("%s has an invalid subagent descriptor provider", c.subject())
	}
	mode := []byte(`"continuable"`)
	if v != "1" {
		mode = rawjson.Get(d, "mode")
		if !rawjson.StringIs(mode, "continuable") && !rawjson.StringIs(mode, "one-shot") {
			return nil, refusal("%s has an invalid subagent descriptor mode", c.subject())
		}
	}
	data := fmt.Appendf(nil, `{"version":0,"childId":%s,"childCreatedAt":%d,"mode":%s`, jsonString(c.ChildID), c.ChildCreatedAt, mode)
	if l := rawjson.Get(d, "label"); l != nil {
		data = fmt.Appendf(data, `,"label":%s`, l)
	}
	data = append(data, '}')
	return parseCatalogFact(data, c.subject())
}

// ChildFinder says where a session's subagent children may be.
type ChildFinder interface {
	// ChildCandidates returns the current generation of every log that may
	// be a direct child of parentID: more, never fewer.
	ChildCandidates(parentID string) ([]string, error)
}

// DirChildren is convkit's layout's ChildFinder: the current generation of
// every log in a conversation directory.
type DirChildren string

func (d DirChildren) ChildCandidates(string) ([]string, error) {
	dir := string(d)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	// Entries come sorted by name: the first of a base's highest version.
	byBase, version := map[string]string{}, map[string]int{}
	for _, de := range entries {
		n, ok := convlog.ParseName(de.Name())
		if v, seen := version[n.Base]; ok && de.Type().IsRegular() && (!seen || n.Version > v) {
			byBase[n.Base], version[n.Base] = filepath.Join(dir, de.Name()), n.Version
		}
	}
	return slices.Collect(maps.Values(byBase)), nil
}

// findChildren returns the candidates whose header makes them children of
// parentID (unreadable: skipped); one in seen, unchanged, is not read again
// (seen holds a candidate not a child with an empty ChildID).
func findChildren(finder ChildFinder, parentID string, seen map[string]ChildFact) ([]ChildFact, error) {
	paths, err := finder.ChildCandidates(parentID)
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []ChildFact
	for _, p := range paths {
		ident, err := statIdentity(p)
		if err != nil {
			continue
		}
		c, ok := seen[p]
		if !ok || c.file != ident {
			r, err := convlog.Open(p, convlog.ReaderOptions{})
			if err != nil {
				continue
			}
			h := r.Header()
			r.Close()
			c = ChildFact{SourcePath: p, file: ident}
			if h.Type == convlog.SessionLog && h.Origin == "subagent" && h.ParentSession == parentID && h.ID != parentID {
				c.ChildID, c.ChildCreatedAt = h.ID, h.CreatedAt
			}
			if seen != nil {
				seen[p] = c
			}
		}
		if c.ChildID != "" {
			out = append(out, c)
		}
	}
	return out, nil
}

// CollectChildrenFrom gathers the facts of parentID's subagent children.
func CollectChildrenFrom(finder ChildFinder, parentID string) ([]ChildFact, error) {
	found, err := findChildren(finder, parentID, nil)
	for i := range found {
		found[i].readDescriptors()
	}
	return found, err
}

// Warnings lists the warnings of facts (children that could not be read).
func Warnings(facts []ChildFact) []string {
	var w []string
	for _, f := range facts {
		if f.Warning != "" {
			w = append(w, f.Warning)
		}
	}
	return w
}

// readDescriptors reads the child's log for its descriptors, or a Warning.
func (f *ChildFact) readDescriptors() {
	r, err := Open(f.SourcePath, Options{})
	if err != nil {
		f.Warning = fmt.Sprintf("child session %s could not be read: %v", f.ChildID, err)
		return
	}
	defer r.Close()
	var first json.RawMessage
	n := 0
	for ev, err := range r.Events() {
		if err != nil {
			f.Warning = fmt.Sprintf("child session %s could not be read: %v", f.ChildID, err)
			return
		}
		switch ev.Type {
		case "session/end-seed":
			if string(rawjson.Get(ev.Data, "inherited")) == "true" {
				// The child's own descriptors follow the last cut.
				n, first = 0, nil
			}
		case "subagent/descriptor":
			if n == 0 {
				first = append(json.RawMessage(nil), ev.Data...)
			}
			n++
		}
	}
	f.DescriptorCount, f.Descriptor = n, first
}

// Publications records the successors a batch published, with the
// identities of source and successor, by source path; safe for concurrent use.
type Publications struct {
	m sync.Map
}

type publication struct {
	src, dst fileIdentity
	dstPath  string
	id       string // the log id its header names
	// linking: dst is the staged file's, whose ctime the link alters.
	linking bool
}

// linking records, before the link, that the staged file becomes pub.dstPath.
func (p *Publications) linking(srcPath string, pub publication) {
	if p != nil {
		pub.linking = true
		p.m.Store(srcPath, pub)
	}
}

// linked settles what linking recorded: forgotten when the link failed, else
// kept with the linked file's identity if only its ctime changed.
func (p *Publications) linked(srcPath string, ok bool) {
	if p == nil {
		return
	}
	v, _ := p.m.Load(srcPath)
	pub, _ := v.(publication)
	dst, err := statIdentity(pub.dstPath)
	if !ok || err != nil {
		p.m.Delete(srcPath)
		return
	}
	staged := pub.dst
	if staged.ctime = dst.ctime; staged == dst {
		pub.dst, pub.linking = dst, false
		p.m.Store(srcPath, pub)
	}
}

// explains reports whether child a became b only by a successor published
// here, b unchanged since.
func (p *Publications) explains(a, b ChildFact) bool {
	if p == nil || a.ChildID != b.ChildID {
		return false
	}
	v, ok := p.m.Load(a.SourcePath)
	pub, _ := v.(publication)
	if !ok || pub.dstPath != b.SourcePath || pub.src != a.file || pub.id != b.ChildID {
		return false
	}
	if pub.linking {
		b.file.ctime = pub.dst.ctime
	}
	return pub.dst == b.file
}

// fileIdentity says a file is unchanged: device, inode, size, mtime, ctime.
type fileIdentity struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

func statIdentity(path string) (fileIdentity, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileIdentity{}, err
	}
	return identityOf(fi), nil
}

// change says how b, a file's identity now, differs from a ("" if not).
func (a fileIdentity) change(b fileIdentity) string {
	switch {
	case a == b:
		return ""
	case a.dev != b.dev || a.ino != b.ino:
		return "it was replaced by another file"
	case a.size != b.size:
		return fmt.Sprintf("its size went from %d to %d bytes", a.size, b.size)
	case a.mtime != b.mtime:
		return "its modification time changed (same size)"
	}
	return "its status changed (change time; same size and modification time)"
}

// childrenDiff says how the children found later differ from those before
// ("" if not), matched by path, then by id; pubs' successors do not count.
func childrenDiff(before, later []ChildFact, pubs *Publications) string {
	byPath := map[string]int{}
	for j, c := range later {
		byPath[c.SourcePath] = j
	}
	matched := make([]bool, len(later))
	var unmatched []ChildFact
	for _, c := range before {
		j, ok := byPath[c.SourcePath]
		if !ok {
			unmatched = append(unmatched, c)
			continue
		}
		matched[j] = true
		b := later[j]
		if c.ChildID != b.ChildID || c.ChildCreatedAt != b.ChildCreatedAt {
			return fmt.Sprintf("child log %s now names session %s (created %d), not %s (created %d)", c.SourcePath, termtext.Quote(b.ChildID), b.ChildCreatedAt, termtext.Quote(c.ChildID), c.ChildCreatedAt)
		}
		if d := c.file.change(b.file); d != "" {
			return fmt.Sprintf("child session %s changed: %s: %s", termtext.Quote(c.ChildID), c.SourcePath, d)
		}
	}
	for _, c := range unmatched {
		j := -1
		for k, b := range later {
			if !matched[k] && b.ChildID == c.ChildID {
				j = k
				break
			}
		}
		if j < 0 {
			return fmt.Sprintf("child session %s is gone: %s", termtext.Quote(c.ChildID), c.SourcePath)
		}
		matched[j] = true
		if !pubs.explains(c, later[j]) {
			return fmt.Sprintf("child session %s moved from %s to %s", termtext.Quote(c.ChildID), c.SourcePath, later[j].SourcePath)
		}
	}
	for j, b := range later {
		if !matched[j] {
			return fmt.Sprintf("child session %s was added: %s", termtext.Quote(b.ChildID), b.SourcePath)
		}
	}
	return ""
}
