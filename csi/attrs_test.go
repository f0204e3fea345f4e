package csi

import (
	"errors"
	"strings"
	"testing"

	"github.com/shedfs/shedfs/daemon"
)

func TestParseVolumeAttrs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		vol   string
		attrs map[string]string
		want  volumeAttrs
		err   string
	}{
		{name: "user view", vol: "csi-1", attrs: map[string]string{"user": "alice"}, want: volumeAttrs{User: "alice"}},
		{name: "session", vol: "v", attrs: map[string]string{"user": "alice", "session": "s1", "readOnly": "true"}, want: volumeAttrs{User: "alice", Session: "s1", ReadOnly: true}},
		{name: "from the id", vol: "alice@ws1", want: volumeAttrs{User: "alice", Session: "ws1"}},
		{name: "new session", vol: "csi-2", attrs: map[string]string{
			"user": "alice", "newSession": "true", "sessionTTL": "2h", "sessionQuota": "1GiB", "sessionInodes": "100", "onUnpublish": "keep",
			"csi.storage.k8s.io/ephemeral": "true", "csi.storage.k8s.io/pod.name": "p",
		}, want: volumeAttrs{User: "alice", NewSession: true, TTL: "2h", Quota: daemon.Amount{Bytes: 1 << 30, Inodes: 100}, Keep: true}},
		{name: "no user", vol: "csi-3", attrs: map[string]string{"session": "s1"}, err: `"user" is required`},
		{name: "bad user", vol: "v", attrs: map[string]string{"user": "Alice/x"}, err: "not a user name"},
		{name: "bad session", vol: "v", attrs: map[string]string{"user": "alice", "session": "../x"}, err: "not a session id"},
		{name: "unknown key", vol: "v", attrs: map[string]string{"user": "alice", "readonly": "true"}, err: `unknown volume attribute "readonly"`},
		{name: "bad bool", vol: "v", attrs: map[string]string{"user": "alice", "newSession": "yes please"}, err: "give true or false"},
		{name: "bad ttl", vol: "v", attrs: map[string]string{"user": "alice", "newSession": "true", "sessionTTL": "-1h"}, err: "positive duration"},
		{name: "bad quota", vol: "v", attrs: map[string]string{"user": "alice", "newSession": "true", "sessionQuota": "lots"}, err: "sessionQuota"},
		{name: "bad onUnpublish", vol: "v", attrs: map[string]string{"user": "alice", "newSession": "true", "onUnpublish": "burn"}, err: "give trash or keep"},
		{name: "both", vol: "v", attrs: map[string]string{"user": "alice", "session": "s1", "newSession": "true"}, err: "exclude each other"},
		{name: "ttl without new session", vol: "v", attrs: map[string]string{"user": "alice", "sessionTTL": "1h"}, err: "only with newSession=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseVolumeAttrs(tc.vol, tc.attrs)
			if tc.err != "" {
				var ae *attrError
				if err == nil || !errors.As(err, &ae) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want an attribute error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *got != tc.want {
				t.Errorf("got %+v, want %+v", *got, tc.want)
			}
		})
	}
}

func TestParseCreateParams(t *testing.T) {
	for _, tc := range []struct {
		params map[string]string
		want   createParams
		err    string
	}{
		{params: map[string]string{"user": "alice"}, want: createParams{User: "alice"}},
		{params: map[string]string{"user": "alice", "ttl": "24h", "onDelete": "keep", "csi.storage.k8s.io/pvc/name": "x"}, want: createParams{User: "alice", TTL: "24h", Keep: true}},
		{params: map[string]string{"user": "alice", "onDelete": "trash"}, want: createParams{User: "alice"}},
		{params: map[string]string{}, err: `"user" is required`},
		{params: map[string]string{"user": "alice", "ttl": "soon"}, err: "positive duration"},
		{params: map[string]string{"user": "alice", "quota": "1G"}, err: `unknown parameter "quota"`},
	} {
		got, err := parseCreateParams(tc.params)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err = %v, want %q", tc.params, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.params, err)
			continue
		}
		if *got != tc.want {
			t.Errorf("%v: got %+v, want %+v", tc.params, *got, tc.want)
		}
	}
}

func TestIDs(t *testing.T) {
	if got := sessionIDFor("pvc-0b6e3c1a-2f4d-4c1e-9a55-0c2d3e4f5a6b"); got != "pvc-0b6e3c1a-2f4d-4c1e-9a55-0c2d3e4f5a6b" {
		t.Errorf("a valid name is its own id: %s", got)
	}
	a, b := sessionIDFor("Sanity Volume 1"), sessionIDFor("Sanity Volume 2")
	if a == b || !strings.HasPrefix(a, "vol-") || a != sessionIDFor("Sanity Volume 1") {
		t.Errorf("digest ids: %s %s", a, b)
	}
	if long := sessionIDFor(strings.Repeat("x", 128)); len(long) > 64 {
		t.Errorf("id of a long name: %s", long)
	}
	if u, id, ok := splitVolumeID(volumeID("alice", "s1")); !ok || u != "alice" || id != "s1" {
		t.Errorf("split: %s %s %v", u, id, ok)
	}
	for _, bad := range []string{"alice", "@s1", "alice@", "a@b@c", "fake-vol-id"} {
		if _, _, ok := splitVolumeID(bad); ok {
			t.Errorf("split(%q) ok", bad)
		}
	}
	if publishSessionID("v", "/t/1") == publishSessionID("v", "/t/2") {
		t.Error("one session id for two targets")
	}
	for _, ep := range []string{"unix:///csi/csi.sock", "unix:/csi/csi.sock", "/csi/csi.sock"} {
		if p, err := ParseEndpoint(ep); err != nil || p != "/csi/csi.sock" {
			t.Errorf("ParseEndpoint(%q) = %q, %v", ep, p, err)
		}
	}
	for _, ep := range []string{"tcp://127.0.0.1:9000", "unix://host/csi.sock", "csi.sock"} {
		if _, err := ParseEndpoint(ep); err == nil {
			t.Errorf("ParseEndpoint(%q) accepted", ep)
		}
	}
}
