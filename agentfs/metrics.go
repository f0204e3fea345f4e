package agentfs

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count the calls of the agent doors, by door (mcp, api), tool
// or route, and outcome ("ok" or the error's code): every label from a
// fixed set, never a path or a principal.
type Metrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics makes the families and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shedfs_agent_calls_total",
			Help: "Calls of the agent doors (MCP tools, file API routes), by door, tool and outcome (ok or the error code).",
		}, []string{"door", "tool", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "shedfs_agent_call_duration_seconds",
			Help: "Time spent on a call of an agent door, by door and tool.",
			// 10µs to ~40s: a stat is microseconds, an unzip or a grep
			// of a large tree seconds.
			Buckets: prometheus.ExponentialBuckets(1e-5, 4, 12),
		}, []string{"door", "tool"}),
	}
	for _, c := range []prometheus.Collector{m.calls, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Observe counts one call that took d; m nil counts nothing.
func (m *Metrics) Observe(door, tool, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(door, tool, outcome).Inc()
	m.duration.WithLabelValues(door, tool).Observe(d.Seconds())
}

// Outcome is the outcome label of a call that ended with err.
func Outcome(err error) string {
	if err == nil {
		return "ok"
	}
	return string(AsError(err).Code)
}
