package web

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the link server's families: requests by status code (so
// refusals show as 403 and 404), downloads, and bytes served.
type metrics struct {
	requests  *prometheus.CounterVec
	downloads prometheus.Counter
	bytes     prometheus.Counter
	busy      *prometheus.CounterVec
}

// codes are the status codes the server answers with, pre-registered so
// that a dashboard sees zeros.
var codes = []string{"200", "206", "304", "400", "403", "404", "405", "412", "416", "500", "503"}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shedfs_http_requests_total",
			Help: "Requests to the share-by-link server, by HTTP status code.",
		}, []string{"code"}),
		downloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shedfs_link_downloads_total",
			Help: "Files served through links (GET answered 200 or 206).",
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shedfs_http_bytes_served_total",
			Help: "Response body bytes sent by the share-by-link server.",
		}),
		busy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shedfs_http_busy_total",
			Help: "Requests to the share-by-link server refused with 503 by a limit: link_busy_client, link_busy_link, link_busy_server.",
		}, []string{"rule"}),
	}
	for _, r := range []string{ruleBusyClient, ruleBusyLink, ruleBusyServer} {
		m.busy.WithLabelValues(r)
	}
	for _, c := range codes {
		m.requests.WithLabelValues(c)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.downloads, m.bytes, m.busy} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, fmt.Errorf("link metrics: %w", err)
			}
		}
	}
	return m, nil
}
