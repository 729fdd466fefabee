package termtext

import (
	"fmt"
	"strconv"
)

// Size is n bytes as people read a size: "812 bytes" below 1 KiB, else
// three significant figures in binary units, "12.3 KiB", "5.68 MiB",
// "123 GiB". Exact counts belong in JSON and in key=value summary lines.
func Size(n int64) string {
	if n < 0 {
		return "-" + Size(-n)
	}
	if n < 1024 {
		if n == 1 {
			return "1 byte"
		}
		return strconv.FormatInt(n, 10) + " bytes"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n) / 1024
	u := 0
	for v >= 1023.995 && u < len(units)-1 {
		v /= 1024
		u++
	}
	switch {
	case v >= 99.95:
		return fmt.Sprintf("%.0f %s", v, units[u])
	case v >= 9.995:
		return fmt.Sprintf("%.1f %s", v, units[u])
	}
	return fmt.Sprintf("%.2f %s", v, units[u])
}
