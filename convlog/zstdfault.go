package convlog

import (
	"errors"
	"io/fs"
	"syscall"

	"github.com/klauspost/compress/zstd"
)

// zstdSentinels are the decoder's errors that name one fault whatever the
// decoding mode.
var zstdSentinels = []error{
	zstd.ErrCRCMismatch, zstd.ErrReservedBlockType, zstd.ErrCompressedSizeTooBig,
	zstd.ErrBlockTooSmall, zstd.ErrUnexpectedBlockSize, zstd.ErrMagicMismatch,
	zstd.ErrWindowSizeExceeded, zstd.ErrWindowSizeTooSmall, zstd.ErrDecoderSizeExceeded,
	zstd.ErrUnknownDictionary, zstd.ErrFrameSizeExceeded, zstd.ErrFrameSizeMismatch,
}

// zstdFault words why a frame failed to decode. The decoder words damage
// inside a block differently by how it decodes (a frame whole, streamed,
// with or without concurrency), so that damage gets one wording: what a
// log is refused for is the same on every path, and an index built one
// way equals one built another (reindex --check compares the reasons).
// Errors of the file system and the reader's own limits keep their text.
func zstdFault(err error) string {
	for _, s := range zstdSentinels {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	var fe *FormatError
	var pe *fs.PathError
	var errno syscall.Errno
	if errors.Is(err, errDecodeBudget) || errors.As(err, &fe) || errors.As(err, &pe) || errors.As(err, &errno) {
		return err.Error()
	}
	return "corrupt compressed block"
}
