package convlog

import (
	"strings"
	"testing"
)

// TestBlockCheck: a typed block is refused, naming what is wrong, where
// its JSON would break the block schema or its kind is not one written.
func TestBlockCheck(t *testing.T) {
	img := func(a Attachment) Block { return Block{Type: BlockImage, Attachment: &a} }
	good := []Block{TextBlock(""), {Type: BlockReasoning, Text: "r"}, {Type: BlockToolCall, ID: "c", Name: "n"},
		img(Attachment{ID: "i", MediaType: "image/png", Bytes: 3, Width: 1, Height: 2}),
		{Type: BlockFile, Attachment: &Attachment{ID: "f", Name: "a.txt"}}}
	for _, b := range good {
		if err := b.Check(); err != nil {
			t.Errorf("%+v: %v", b, err)
		}
	}
	for _, c := range []struct {
		b    Block
		want string
	}{
		{Block{}, "needs a type"},
		{Block{Type: "tool-result"}, "is not one this build writes"},
		{Block{Type: BlockToolCall, Name: "n"}, "a tool-call block: id: must be a non-empty string"},
		{Block{Type: BlockToolCall, ID: "c"}, "a tool-call block: name: must be a non-empty string"},
		{Block{Type: BlockFile}, "a file block needs an attachment"},
		{Block{Type: BlockFile, Attachment: &Attachment{ID: "f"}}, "attachment.name: is missing"},
		{img(Attachment{ID: "i", MediaType: "image/tiff", Bytes: 1, Width: 1, Height: 1}), "attachment.mediaType: must be one of"},
		{img(Attachment{ID: "i", MediaType: "image/png", Bytes: 1, Height: 1}), "attachment.width: must be a positive safe integer"},
		{img(Attachment{MediaType: "image/png", Bytes: 1, Width: 1, Height: 1}), "attachment.attachmentId: must be a non-empty string"},
		{img(Attachment{ID: "i", MediaType: "image/png", Bytes: -1, Width: 1, Height: 1}), "attachment.bytes: must be a non-negative"},
	} {
		if err := c.b.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: Check = %v, want %q", c.b, err, c.want)
		}
	}
}
