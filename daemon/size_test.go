package daemon

import "testing"

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "0", want: 0},
		{in: "none", want: 0},
		{in: "Unlimited", want: 0},
		{in: "4096", want: 4096},
		{in: "12B", want: 12},
		{in: "10GiB", want: 10 << 30},
		{in: "10gib", want: 10 << 30},
		{in: "10G", want: 10 << 30},
		{in: "500M", want: 500 << 20},
		{in: "500MiB", want: 500 << 20},
		{in: "500MB", want: 500e6},
		{in: "1.5G", want: 3 << 29},
		{in: "0.5K", want: 512},
		{in: "2T", want: 2 << 40},
		{in: "1k", want: 1024},
		{in: " 7 MiB ", want: 7 << 20},
		{in: "7EiB", want: 7 << 60},
		{in: "8EiB", bad: true},
		{in: "9223372036854775807", want: 9223372036854775807},
		{in: "9223372036854775808", bad: true},
		{in: "", bad: true},
		{in: "G", bad: true},
		{in: "-1", bad: true},
		{in: "-1G", bad: true},
		{in: "+1G", bad: true},
		{in: "1e3", bad: true},
		{in: "1.5e3K", bad: true},
		{in: "10 XB", bad: true},
		{in: "10GiBs", bad: true},
		{in: "ten", bad: true},
		{in: "1..5G", bad: true},
		{in: "NaN", bad: true},
		{in: "Inf", bad: true},
	} {
		got, err := ParseSize(tc.in)
		switch {
		case tc.bad && err == nil:
			t.Errorf("ParseSize(%q) = %d, want an error", tc.in, got)
		case !tc.bad && err != nil:
			t.Errorf("ParseSize(%q): %v", tc.in, err)
		case !tc.bad && got != tc.want:
			t.Errorf("ParseSize(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestParseCount(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "0", want: 0},
		{in: "none", want: 0},
		{in: "100000", want: 100000},
		{in: "100k", want: 100000},
		{in: "2M", want: 2000000},
		{in: "-5", bad: true},
		{in: "1.5", bad: true},
		{in: "", bad: true},
		{in: "lots", bad: true},
		{in: "99999999999999999999", bad: true},
	} {
		got, err := ParseCount(tc.in)
		switch {
		case tc.bad && err == nil:
			t.Errorf("ParseCount(%q) = %d, want an error", tc.in, got)
		case !tc.bad && err != nil:
			t.Errorf("ParseCount(%q): %v", tc.in, err)
		case !tc.bad && got != tc.want:
			t.Errorf("ParseCount(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{
		{0, "0 B"},
		{512, "512 B"},
		{1023, "1023 B"},
		{1024, "1 KiB"},
		{1536, "1.5 KiB"},
		{10 << 30, "10 GiB"},
		{3 << 29, "1.5 GiB"},
		{1<<63 - 1, "8 EiB"},
	} {
		if got := FormatSize(tc.in); got != tc.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// What FormatSize prints, ParseSize reads back (to the shown precision).
	for _, n := range []int64{0, 512, 1024, 10 << 30, 3 << 29} {
		got, err := ParseSize(FormatSize(n))
		if err != nil || got != n {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", n, got, err)
		}
	}
}
