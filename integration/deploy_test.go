package integration

import (
	"encoding/json"
	"strings"
	"testing"
)

// These tests run serve as an operator deploys it (issue 29): structured
// logs, health endpoints, a config file, systemd's notify protocol, the
// drain at stop.

// TestServeLogFormatJSON: with --log-format json (given after the
// command, as a unit file writes it) every line serve writes on stderr,
// from start to a clean stop, is one JSON object with a time, a level and
// a message.
func TestServeLogFormatJSON(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	s := startServeWith(t, store, []string{"--log-format", "json"}, "alice")
	adminOK(t, "user", "add", "bob", "--store", store)
	s.waitView("bob")
	s.Stop()
	lines := strings.Split(strings.TrimSuffix(s.Stderr(), "\n"), "\n")
	if len(lines) < 3 {
		t.Fatalf("serve logged %d lines, want at least 3 (views mounted, serving, stopped):\n%s", len(lines), s.Stderr())
	}
	var msgs []string
	for _, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Errorf("not one JSON object: %q: %v", l, err)
			continue
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := ev[k]; !ok {
				t.Errorf("line %q has no %q", l, k)
			}
		}
		msgs = append(msgs, ev["msg"].(string))
	}
	for _, want := range []string{"view mounted", "serving", "stopped cleanly"} {
		found := false
		for _, m := range msgs {
			found = found || m == want
		}
		if !found {
			t.Errorf("no %q event in %q", want, msgs)
		}
	}
}
