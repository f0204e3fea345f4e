package fusefs

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shedfs/shedfs"
)

// TestTrackSeries checks that the resolved children count exactly what
// WithLabelValues counted: one series per (op, zone kind, result), made on
// first use, with the request durations per op, and the byte counters per
// zone kind.
func TestTrackSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	f := &FS{opts: Options{Metrics: m}}
	private := shedfs.Zone{Kind: shedfs.ZonePrivate, Principal: "alice"}
	group := shedfs.Zone{Kind: shedfs.ZoneGroup, Principal: "team"}
	track := func(op string, z shedfs.Zone, e syscall.Errno) {
		f.track(op, z, time.Now(), &e)
	}
	for range 3 {
		track("lookup", private, 0)
	}
	track("lookup", private, syscall.ENOENT)
	track("lookup", shedfs.Zone{Kind: shedfs.ZoneGroup, Principal: "other"}, 0)
	track("lookup", group, 0)
	track("create", shedfs.Zone{}, syscall.EACCES)
	f.countWrite(group, 10)
	f.countWrite(group, 5)
	f.countRead(private, 7)
	f.countRead(shedfs.Zone{}, 3)

	got := gathered(t, reg)
	want := []string{
		`shedfs_bytes_read_total{zone="group"} 0`,
		`shedfs_bytes_read_total{zone="none"} 3`,
		`shedfs_bytes_read_total{zone="output"} 0`,
		`shedfs_bytes_read_total{zone="private"} 7`,
		`shedfs_bytes_read_total{zone="share"} 0`,
		`shedfs_bytes_read_total{zone="uploads"} 0`,
		`shedfs_bytes_written_total{zone="group"} 15`,
		`shedfs_bytes_written_total{zone="output"} 0`,
		`shedfs_bytes_written_total{zone="private"} 0`,
		`shedfs_bytes_written_total{zone="share"} 0`,
		`shedfs_bytes_written_total{zone="uploads"} 0`,
		`shedfs_fuse_request_duration_seconds{op="create"} 1`,
		`shedfs_fuse_request_duration_seconds{op="lookup"} 6`,
		`shedfs_fuse_requests_total{op="create",result="EACCES",zone="none"} 1`,
		`shedfs_fuse_requests_total{op="lookup",result="ENOENT",zone="private"} 1`,
		`shedfs_fuse_requests_total{op="lookup",result="ok",zone="group"} 2`,
		`shedfs_fuse_requests_total{op="lookup",result="ok",zone="private"} 3`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("series:\n%q\nwant:\n%q", got, want)
	}
	if f.Requests() != 7 {
		t.Errorf("Requests() = %d, want 7", f.Requests())
	}
}

// gathered lists the request and byte series of reg as "name{labels}
// value", histograms with their sample count, sorted.
func gathered(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, fam := range fams {
		switch fam.GetName() {
		case "shedfs_fuse_requests_total", "shedfs_fuse_request_duration_seconds", "shedfs_bytes_read_total", "shedfs_bytes_written_total":
		default:
			continue
		}
		for _, m := range fam.GetMetric() {
			labels := ""
			for i, l := range m.GetLabel() {
				if i > 0 {
					labels += ","
				}
				labels += fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
			}
			v := m.GetCounter().GetValue()
			if h := m.GetHistogram(); h != nil {
				v = float64(h.GetSampleCount())
			}
			out = append(out, fmt.Sprintf("%s{%s} %v", fam.GetName(), labels, v))
		}
	}
	slices.Sort(out)
	return out
}

// BenchmarkTrack is the metrics cost of one request.
func BenchmarkTrack(b *testing.B) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	f := &FS{opts: Options{Metrics: m}}
	z := shedfs.Zone{Kind: shedfs.ZonePrivate, Principal: "alice"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			var e syscall.Errno
			f.track("setattr", z, time.Now(), &e)
		}
	})
}
