package s3test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// TestServerKeepsDataAcrossKillAndRestart proves what the harness
// promises its users: the bucket exists, the server refuses a wrong
// secret, a SIGKILL makes it unreachable, and a restart on the same
// directory and ports serves what it stored before.
func TestServerKeepsDataAcrossKillAndRestart(t *testing.T) {
	s := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := s.client()
	put := &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("a/b"), Body: bytes.NewReader([]byte("kept"))}
	if _, err := c.PutObject(ctx, put); err != nil {
		t.Fatalf("put: %v", err)
	}

	wrong := s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint), Region: Region, UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s.AccessKey, "not-the-secret", ""),
	})
	_, err := wrong.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("a/b")})
	if err == nil {
		t.Fatal("HEAD with a wrong secret succeeded: the server does not check signatures")
	}

	s.Kill()
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	_, err = c.HeadObject(short, &s3.HeadObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("a/b")})
	cancelShort()
	if err == nil {
		t.Fatal("HEAD succeeded on a killed server")
	}

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("a/b")})
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	defer got.Body.Close()
	data, err := io.ReadAll(got.Body)
	if err != nil || string(data) != "kept" {
		t.Fatalf("after restart: %q, %v; want \"kept\"", data, err)
	}
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(".s3test-probe")})
	var api smithy.APIError
	if !errors.As(err, &api) {
		t.Fatalf("the readiness probe's object: %v, want it deleted", err)
	}
}

func TestURL(t *testing.T) {
	s := &Server{Endpoint: "http://127.0.0.1:8333", Bucket: "b"}
	for prefix, want := range map[string]string{
		"":     "s3://b/?endpoint=http%3A%2F%2F127.0.0.1%3A8333&region=us-east-1",
		"p/q":  "s3://b/p/q?endpoint=http%3A%2F%2F127.0.0.1%3A8333&region=us-east-1",
		"/p/q": "s3://b/p/q?endpoint=http%3A%2F%2F127.0.0.1%3A8333&region=us-east-1",
	} {
		if got := s.URL(prefix); got != want {
			t.Errorf("URL(%q) = %q, want %q", prefix, got, want)
		}
	}
}

func TestPattern(t *testing.T) {
	read := func(seed uint64, size int64) []byte {
		data, err := io.ReadAll(Pattern(seed, size))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	a := read(1, 3<<20+5)
	if len(a) != 3<<20+5 {
		t.Fatalf("Pattern(1, %d) gave %d bytes", 3<<20+5, len(a))
	}
	if !bytes.Equal(a, read(1, 3<<20+5)) {
		t.Error("Pattern is not the same for the same seed")
	}
	if bytes.Equal(a[:4096], read(2, 4096)) {
		t.Error("Pattern is the same for two seeds")
	}
	if !bytes.Equal(a[:patternBlock], a[patternBlock:2*patternBlock]) || bytes.Equal(a[:4096], a[4096:8192]) {
		t.Error("Pattern should repeat its block and only its block")
	}
}
