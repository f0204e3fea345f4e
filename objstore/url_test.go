package objstore

import (
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want Location
	}{
		{"s3://bucket", Location{Bucket: "bucket"}},
		{"s3://bucket/", Location{Bucket: "bucket"}},
		{"s3://my.bucket-1/a/b/", Location{Bucket: "my.bucket-1", Prefix: "a/b"}},
		{"s3://bucket/p?region=eu-west-3", Location{Bucket: "bucket", Prefix: "p", Region: "eu-west-3"}},
		{"s3://bucket/p?endpoint=https://minio.example.org:9000&region=r1",
			Location{Bucket: "bucket", Prefix: "p", Endpoint: "https://minio.example.org:9000", Region: "r1"}},
		{"s3://bucket?endpoint=http%3A%2F%2F127.0.0.1%3A8333", Location{Bucket: "bucket", Endpoint: "http://127.0.0.1:8333"}},
		{"s3://bucket?endpoint=http://localhost:8333/", Location{Bucket: "bucket", Endpoint: "http://localhost:8333"}},
		{"s3://bucket?endpoint=http://[::1]:8333", Location{Bucket: "bucket", Endpoint: "http://[::1]:8333"}},
	} {
		got, err := ParseURL(c.raw)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", c.raw, err)
			continue
		}
		if got != c.want {
			t.Errorf("ParseURL(%q) = %+v, want %+v", c.raw, got, c.want)
		}
		again, err := ParseURL(got.String())
		if err != nil || again != got {
			t.Errorf("ParseURL(%q.String() = %q) = %+v, %v; want it back", c.raw, got.String(), again, err)
		}
	}
}

func TestParseURLRefuses(t *testing.T) {
	for raw, why := range map[string]string{
		"":                                     "scheme",
		"/var/lib/shedfs/blobs":                "scheme",
		"gs://bucket":                          "scheme",
		"s3:bucket":                            "only a bucket name",
		"s3://":                                "no bucket name",
		"s3://ab":                              "3 to 63",
		"s3://" + strings.Repeat("a", 64):      "3 to 63",
		"s3://Bucket":                          "lower-case",
		"s3://-bucket":                         "lower-case",
		"s3://bucket-":                         "lower-case",
		"s3://buck_et":                         "lower-case",
		"s3://key:secret@bucket":               "only a bucket name",
		"s3://bucket:9000":                     "only a bucket name",
		"s3://bucket#x":                        "only a bucket name",
		"s3://bucket/a//b":                     "segment",
		"s3://bucket/a/../b":                   "segment",
		"s3://bucket/./b":                      "segment",
		"s3://bucket?regoin=x":                 "unknown parameter",
		"s3://bucket?region=":                  "empty region",
		"s3://bucket?region=a&region=b":        "2 times",
		"s3://bucket?endpoint=":                "not a URL",
		"s3://bucket?endpoint=minio:9000":      "not a URL with a host",
		"s3://bucket?endpoint=ftp://h":         "scheme must be https",
		"s3://bucket?endpoint=http://h:9000":   "only on a loopback",
		"s3://bucket?endpoint=http://10.0.0.1": "only on a loopback",
		"s3://bucket?endpoint=https://h/path":  "only scheme, host and port",
		"s3://bucket?endpoint=https://u:p@h":   "only scheme, host and port",
	} {
		_, err := ParseURL(raw)
		if err == nil {
			t.Errorf("ParseURL(%q) succeeded, want an error about %q", raw, why)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, why) || !strings.Contains(msg, "s3://BUCKET/PREFIX") {
			t.Errorf("ParseURL(%q) = %q, want it to say %q and show the syntax", raw, msg, why)
		}
	}
}

func TestKeysAreRelativeToThePrefix(t *testing.T) {
	for _, c := range []struct{ prefix, rel, key string }{
		{"", "a/b", "a/b"},
		{"p", "a", "p/a"},
		{"p/q", "a/b", "p/q/a/b"},
	} {
		l := Location{Bucket: "b", Prefix: c.prefix}
		if got := l.key(c.rel); got != c.key {
			t.Errorf("prefix %q: key(%q) = %q, want %q", c.prefix, c.rel, got, c.key)
		}
		if got := l.rel(c.key); got != c.rel {
			t.Errorf("prefix %q: rel(%q) = %q, want %q", c.prefix, c.key, got, c.rel)
		}
	}
}
