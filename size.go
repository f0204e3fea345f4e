package shedfs

import (
	"math"
	"strconv"
	"strings"
)

// FormatSize renders a byte count the way df -h would, in IEC units:
// "0 B", "512 B", "1.5 KiB", "10 GiB". The admin API's lines and the
// core's refusals of admin operations both say sizes this way.
func FormatSize(n int64) string {
	if n < 1024 && n > -1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n)
	u := ""
	for _, next := range units {
		if math.Abs(v) < 1024 {
			break
		}
		v /= 1024
		u = next
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + u
}
