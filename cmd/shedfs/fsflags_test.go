package main

import "testing"

func TestMemoryCeiling(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "25%", want: 4 * gib},
		{in: "100%", want: 16 * gib},
		{in: "0%", want: 0},
		{in: "0", want: 0},
		{in: "2GiB", want: 2 * gib},
		{in: "12.5%", want: 2 * gib},
		{in: "150%", bad: true},
		{in: "-1%", bad: true},
		{in: "x%", bad: true},
		{in: "lots", bad: true},
	} {
		got, err := memoryCeiling(c.in, 16*gib)
		if c.bad {
			if err == nil {
				t.Errorf("memoryCeiling(%q) = %d, want an error", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("memoryCeiling(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}
