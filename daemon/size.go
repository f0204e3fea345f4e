package daemon

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/shedfs/shedfs"
)

// sizeUnits maps a size suffix (lower case) to its multiplier. Bare letters
// and the IEC forms are powers of 1024, as with truncate -s, dd and df -h,
// which is what an operator sizing a quota expects; the "KB", "MB" forms
// are the SI powers of 1000 for those who mean them.
var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
	"p": 1 << 50, "pib": 1 << 50, "pb": 1e15,
	"e": 1 << 60, "eib": 1 << 60, "eb": 1e18,
}

// ParseSize reads a size as an operator writes it: "10GiB", "500M",
// "1.5G", "4096". "0", "none" and "unlimited" are 0, which quotas read as
// no limit. Fractions are rounded down to whole bytes.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "none", "unlimited":
		return 0, nil
	case "":
		return 0, fmt.Errorf("size %q: empty", s)
	}
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.TrimSpace(t[i:])
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q (use B, K, M, G, T, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", s, t[i:])
	}
	if num == "" || strings.ContainsAny(num, "+-eE") {
		return 0, fmt.Errorf("size %q: not a number of bytes", s)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseUint(num, 10, 63)
		if err != nil {
			return 0, fmt.Errorf("size %q: not a number of bytes", s)
		}
		if mult == 1 {
			return int64(n), nil
		}
		if float64(n)*mult >= math.MaxInt64 {
			return 0, fmt.Errorf("size %q: too large", s)
		}
		if m := uint64(mult); float64(m) == mult && n <= math.MaxInt64/m {
			return int64(n * m), nil
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("size %q: not a number of bytes", s)
	}
	v := f * mult
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return int64(v), nil
}

// ParseCount reads an inode count: a whole number, "0", "none" or
// "unlimited" (0, no limit), or one with a decimal K or M suffix ("100k").
func ParseCount(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "none", "unlimited":
		return 0, nil
	}
	mult := int64(1)
	switch {
	case strings.HasSuffix(t, "k"):
		mult, t = 1000, strings.TrimSuffix(t, "k")
	case strings.HasSuffix(t, "m"):
		mult, t = 1000000, strings.TrimSuffix(t, "m")
	}
	n, err := strconv.ParseUint(t, 10, 63)
	if err != nil || (n > 0 && int64(n) > math.MaxInt64/mult) {
		return 0, fmt.Errorf("count %q: not a whole number", s)
	}
	return int64(n) * mult, nil
}

// FormatSize renders a byte count the way df -h would, in IEC units:
// "0 B", "512 B", "1.5 KiB", "10 GiB" (shedfs.FormatSize).
func FormatSize(n int64) string { return shedfs.FormatSize(n) }
