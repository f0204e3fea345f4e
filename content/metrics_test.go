package content

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestClamdUpOnlyWithClamd: shedfs_clamd_up is exported only when a clamd
// is configured (1 until a scan fails to reach it); without one there is
// no series, rather than a 1 that says a clamd nobody asked for is up
// (issue 27).
func TestClamdUpOnlyWithClamd(t *testing.T) {
	for _, clamd := range []bool{false, true} {
		reg := prometheus.NewRegistry()
		m, err := NewMetrics(reg, clamd)
		if err != nil {
			t.Fatal(err)
		}
		m.setUp(false)
		m.setUp(true)
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var up *float64
		scans := false
		for _, f := range fams {
			switch f.GetName() {
			case "shedfs_clamd_up":
				v := f.GetMetric()[0].GetGauge().GetValue()
				up = &v
			case "shedfs_scans_total":
				scans = true
			}
		}
		switch {
		case !scans:
			t.Errorf("clamd %v: no shedfs_scans_total", clamd)
		case clamd && (up == nil || *up != 1):
			t.Errorf("with clamd: shedfs_clamd_up = %v, want 1", up)
		case !clamd && up != nil:
			t.Errorf("without clamd: shedfs_clamd_up = %v, want no series", *up)
		}
	}
}
