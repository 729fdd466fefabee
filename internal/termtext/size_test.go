package termtext

import "testing"

func TestSize(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{
		{0, "0 bytes"}, {1, "1 byte"}, {812, "812 bytes"}, {1023, "1023 bytes"},
		{1024, "1.00 KiB"}, {1536, "1.50 KiB"}, {12595, "12.3 KiB"}, {1048575, "1.00 MiB"},
		{5954723, "5.68 MiB"}, {123 << 30, "123 GiB"}, {1<<63 - 1, "8.00 EiB"}, {-2048, "-2.00 KiB"},
	} {
		if got := Size(tt.n); got != tt.want {
			t.Errorf("Size(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
