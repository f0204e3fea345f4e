package objstore

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Location is a parsed bucket address,
// s3://BUCKET/PREFIX?endpoint=URL&region=R. It is the only place the
// address's syntax is read or written.
type Location struct {
	// Bucket is the bucket's name.
	Bucket string
	// Prefix is prepended to every key, "" or a path without leading or
	// trailing slash ("shedfs/store1"): keys are relative to it.
	Prefix string
	// Endpoint is the base URL of an S3-compatible server; "" means AWS,
	// addressed by region. With an endpoint, requests are path-style
	// (http://host/bucket/key), which S3-compatible servers expect.
	Endpoint string
	// Region is the signing region; "" means the SDK's configuration
	// (AWS_REGION, the shared config file).
	Region string
}

// ParseURL parses a bucket address. Every mistake gives one error that
// names the address and says what is wrong.
func ParseURL(raw string) (Location, error) {
	loc, err := parseURL(raw)
	if err != nil {
		return Location{}, fmt.Errorf("bucket address %q: %w (want s3://BUCKET/PREFIX?endpoint=URL&region=R)", raw, err)
	}
	return loc, nil
}

func parseURL(raw string) (Location, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Location{}, errors.New("not a URL")
	}
	if u.Scheme != "s3" {
		return Location{}, fmt.Errorf("scheme %q, not s3", u.Scheme)
	}
	if u.Opaque != "" || u.User != nil || u.Fragment != "" || u.Port() != "" {
		return Location{}, errors.New("only a bucket name may come between s3:// and the prefix")
	}
	loc := Location{Bucket: u.Host}
	if err := checkBucketName(loc.Bucket); err != nil {
		return Location{}, err
	}
	if loc.Prefix, err = cleanPrefix(u.Path); err != nil {
		return Location{}, err
	}
	q := u.Query()
	for k, v := range q {
		if k != "endpoint" && k != "region" {
			return Location{}, fmt.Errorf("unknown parameter %q (endpoint and region are known)", k)
		}
		if len(v) != 1 {
			return Location{}, fmt.Errorf("parameter %q given %d times", k, len(v))
		}
	}
	loc.Region = q.Get("region")
	if q.Has("region") && loc.Region == "" {
		return Location{}, errors.New("empty region")
	}
	if q.Has("endpoint") {
		if loc.Endpoint, err = checkEndpoint(q.Get("endpoint")); err != nil {
			return Location{}, err
		}
	}
	return loc, nil
}

// checkBucketName applies S3's bucket naming rules (3 to 63 lower-case
// letters, digits, dots and hyphens, starting and ending with a letter or
// digit), so that a typo is reported here and not as a signature error.
func checkBucketName(b string) error {
	if b == "" {
		return errors.New("no bucket name")
	}
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("bucket name %q is not 3 to 63 characters long", b)
	}
	for i, c := range b {
		edge := i == 0 || i == len(b)-1
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '-' || c == '.') && !edge:
		default:
			return fmt.Errorf("bucket name %q: only lower-case letters, digits, dots and hyphens, starting and ending with a letter or digit", b)
		}
	}
	return nil
}

// cleanPrefix turns the URL path into a prefix: no leading or trailing
// slash, and no empty, "." or ".." segment (a key must mean one object).
func cleanPrefix(p string) (string, error) {
	p = strings.Trim(p, "/")
	if p == "" {
		return "", nil
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("prefix %q has an empty, . or .. segment", p)
		}
	}
	return p, nil
}

// checkEndpoint accepts an https URL, or an http one on a loopback host
// (a test server, a local gateway): elsewhere http would carry the
// signed requests and the contents in clear.
func checkEndpoint(raw string) (string, error) {
	e, err := url.Parse(raw)
	if err != nil || e.Host == "" || e.Opaque != "" {
		return "", fmt.Errorf("endpoint %q is not a URL with a host", raw)
	}
	if e.User != nil || e.RawQuery != "" || e.Fragment != "" || strings.Trim(e.Path, "/") != "" {
		return "", fmt.Errorf("endpoint %q: only scheme, host and port", raw)
	}
	switch e.Scheme {
	case "https":
	case "http":
		if !isLoopback(e.Hostname()) {
			return "", fmt.Errorf("endpoint %q: plain http only on a loopback address; use https", raw)
		}
	default:
		return "", fmt.Errorf("endpoint %q: scheme must be https (or http on loopback)", raw)
	}
	return e.Scheme + "://" + e.Host, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// String formats the location as an address ParseURL reads back.
func (l Location) String() string {
	q := url.Values{}
	if l.Endpoint != "" {
		q.Set("endpoint", l.Endpoint)
	}
	if l.Region != "" {
		q.Set("region", l.Region)
	}
	u := url.URL{Scheme: "s3", Host: l.Bucket, Path: "/" + l.Prefix, RawQuery: q.Encode()}
	return u.String()
}

// key is the object key of a key relative to the prefix.
func (l Location) key(rel string) string {
	if l.Prefix == "" {
		return rel
	}
	return l.Prefix + "/" + rel
}

// rel is the key relative to the prefix of an object key under it.
func (l Location) rel(key string) string {
	if l.Prefix == "" {
		return key
	}
	return strings.TrimPrefix(key, l.Prefix+"/")
}
