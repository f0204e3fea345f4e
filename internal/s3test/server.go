// Package s3test starts a real S3 server for tests: SeaweedFS's `weed
// server -s3`, a child process on loopback ports with its data in the
// test's temporary directory and signature-V4 authentication on. Object
// storage code must be proven against a server that verifies signatures
// and checksums and that can be killed and restarted, never against an
// in-process imitation.
//
// The weed binary is built once per machine by .ci/seaweedfs (`make test`
// does it and passes the path in SHEDFS_WEED).
package s3test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/shedfs/shedfs/objstore"
)

// EnvBinary names the environment variable that gives the weed binary's
// path; `make test` sets it to what .ci/seaweedfs printed.
const EnvBinary = "SHEDFS_WEED"

// Region is the region the server is addressed with (SeaweedFS accepts
// any; the signature covers it).
const Region = "us-east-1"

// startLimit bounds how long the server may take to accept a write after
// a start or restart: about 11 s after a start and 17 s after a restart
// on 2 cores (the filer holds the first write until its lock ring forms).
const startLimit = 90 * time.Second

// Server is a running SeaweedFS whose S3 gateway serves one bucket to one
// identity.
type Server struct {
	// Endpoint is the S3 gateway's base URL, http://127.0.0.1:PORT.
	Endpoint string
	// Bucket exists and is empty when Start returns.
	Bucket string
	// AccessKey and SecretKey are the only credentials the server accepts.
	AccessKey, SecretKey string

	binary string
	dir    string
	ports  ports

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
}

// ports are the server's listening ports: HTTP and gRPC for each of its
// four parts.
type ports struct {
	master, masterGRPC, volume, volumeGRPC, filer, filerGRPC, s3, s3GRPC int
}

// Binary returns the weed binary's path: SHEDFS_WEED when set, else where
// .ci/seaweedfs builds it (asked with --path, so the version is written
// in one place). ok is false when there is no binary there.
func Binary() (path string, ok bool) {
	if p := os.Getenv(EnvBinary); p != "" {
		return p, isExecutable(p)
	}
	script, err := findScript()
	if err != nil {
		return "", false
	}
	out, err := exec.Command(script, "--path").Output()
	if err != nil {
		return "", false
	}
	p := strings.TrimSpace(string(out))
	return p, isExecutable(p)
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// findScript finds .ci/seaweedfs in the working directory or above it (a
// test runs in its package's directory inside the checkout).
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, ".ci", "seaweedfs")
		if isExecutable(p) {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New(".ci/seaweedfs not found above the working directory")
		}
		dir = parent
	}
}

// Start starts a server in t's temporary directory, creates its bucket,
// and stops it when t ends (even on failure). Without the weed binary it
// fails the test when CI=true and skips it otherwise, saying how to build
// it.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, ok := Binary()
	if !ok {
		msg := fmt.Sprintf("no SeaweedFS weed binary (%s=%q): run .ci/seaweedfs (builds it once, about 7 minutes) and set %s to the path it prints, or run make test",
			EnvBinary, os.Getenv(EnvBinary), EnvBinary)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	s, err := start(bin, t.TempDir())
	if s != nil {
		t.Cleanup(func() {
			s.Stop()
			if t.Failed() {
				t.Logf("SeaweedFS log (last 4 KiB):\n%s", s.LogTail(4096))
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// start starts a server, again on fresh ports when one was taken between
// the probe that found it free and weed's listen (other tests run on the
// same machine).
func start(bin, dir string) (*Server, error) {
	for attempt := 1; ; attempt++ {
		s, err := startOnce(bin, filepath.Join(dir, fmt.Sprintf("try%d", attempt)))
		if err == nil || attempt == 3 || !strings.Contains(s.LogTail(1<<16), "address already in use") {
			return s, err
		}
		s.Stop()
	}
}

func startOnce(bin, dir string) (*Server, error) {
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return nil, fmt.Errorf("s3test: %w", err)
	}
	p, err := freePorts()
	if err != nil {
		return nil, err
	}
	s := &Server{
		Endpoint:  "http://127.0.0.1:" + strconv.Itoa(p.s3),
		Bucket:    "shedfs-test",
		AccessKey: "SHEDFSTESTACCESSKEY",
		SecretKey: "shedfs-test-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		binary:    bin,
		dir:       dir,
		ports:     p,
	}
	if err := s.writeIdentity(); err != nil {
		return nil, err
	}
	if err := s.run(); err != nil {
		return s, err
	}
	if err := s.waitWritable(true); err != nil {
		return s, err
	}
	return s, nil
}

// writeIdentity writes the S3 gateway's identity file: one admin identity,
// no anonymous access, so that every request must carry a valid
// signature.
func (s *Server) writeIdentity() error {
	conf := fmt.Sprintf(`{"identities":[{"name":"shedfs-test","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","List","Tagging","Write"]}]}`,
		s.AccessKey, s.SecretKey)
	if err := os.WriteFile(filepath.Join(s.dir, "s3.json"), []byte(conf), 0o600); err != nil {
		return fmt.Errorf("s3test: identity file: %w", err)
	}
	return nil
}

// run starts the weed process on the server's directory and ports.
func (s *Server) run() error {
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("s3test: log: %w", err)
	}
	p := s.ports
	data := filepath.Join(s.dir, "data")
	cmd := exec.Command(s.binary,
		"-logdir="+s.dir, "-v=0",
		"server",
		"-dir="+data, "-master.dir="+data,
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port="+strconv.Itoa(p.master), "-master.port.grpc="+strconv.Itoa(p.masterGRPC),
		"-volume.port="+strconv.Itoa(p.volume), "-volume.port.grpc="+strconv.Itoa(p.volumeGRPC),
		"-filer.port="+strconv.Itoa(p.filer), "-filer.port.grpc="+strconv.Itoa(p.filerGRPC),
		"-filer.localSocket="+filepath.Join(s.dir, "filer.sock"),
		"-s3", "-s3.port="+strconv.Itoa(p.s3), "-s3.port.grpc="+strconv.Itoa(p.s3GRPC),
		"-s3.localSocket="+filepath.Join(s.dir, "s3.sock"),
		"-s3.port.iceberg=0", "-s3.port.lance=0",
		"-s3.config="+filepath.Join(s.dir, "s3.json"),
		"-s3.autoCreateBucket=false",
		// Volumes of 256 MiB, up to 32 of them: a 1 GiB object fits
		// with room to spare, and the data directory stays small.
		"-master.volumeSizeLimitMB=256", "-volume.max=32",
		"-volume.preStopSeconds=0",
		"-master.telemetry=false",
		// One master: no peer to wait for before it leads again after
		// a restart (the default 10 s makes a restart take 20 s).
		"-master.electionTimeout=1s",
	)
	cmd.Dir = s.dir
	// A fresh master holds volume allocation for a few seconds in case
	// another master already allocated ids; with one master there is none.
	cmd.Env = append(os.Environ(), "WEED_MASTER_VOLUME_GROWTH_ALLOCATION_DEFERRAL=0s")
	cmd.Stdout, cmd.Stderr = logf, logf
	// The server dies with the test binary, whatever happens to it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("s3test: start %s: %w", s.binary, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	return nil
}

// Kill stops the server with SIGKILL, as a crash would, and waits until
// it is gone. Killing a stopped server does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

// Restart starts a killed server again on the same data directory and
// ports and waits until it accepts writes.
func (s *Server) Restart() error {
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	if running {
		return errors.New("s3test: Restart of a server that runs: Kill it first")
	}
	if err := s.run(); err != nil {
		return err
	}
	return s.waitWritable(false)
}

// Stop kills the server and removes the gRPC sockets weed made in /tmp
// (their paths are fixed by weed, named after our ports); the data
// directory goes with the test's temporary directory.
func (s *Server) Stop() {
	s.Kill()
	p := s.ports
	for name, port := range map[string]int{"master": p.masterGRPC, "volume": p.volumeGRPC, "filer": p.filerGRPC, "s3": p.s3GRPC} {
		os.Remove(fmt.Sprintf("/tmp/seaweedfs-%s-grpc-%d.sock", name, port))
	}
}

// URL returns the shedfs address of the bucket with prefix (which may be
// empty): s3://BUCKET/PREFIX?endpoint=...&region=....
func (s *Server) URL(prefix string) string {
	return objstore.Location{Bucket: s.Bucket, Prefix: strings.Trim(prefix, "/"), Endpoint: s.Endpoint, Region: Region}.String()
}

// Env returns the standard AWS environment variables that give the
// server's credentials, for a child process (a daemon under test).
func (s *Server) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s.SecretKey, "AWS_REGION=" + Region}
}

func (s *Server) logPath() string { return filepath.Join(s.dir, "weed.log") }

// LogTail returns the last n bytes of the server's output, for a failing
// test.
func (s *Server) LogTail(n int) string {
	if s == nil {
		return ""
	}
	data, _ := os.ReadFile(s.logPath())
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}

// client is an S3 client with the server's credentials, for setting the
// server up and probing it; the code under test brings its own.
func (s *Server) client() *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       Region,
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
}

// waitWritable waits until the server stores an object: the S3 gateway
// answers before the master has a volume server to write to. With create
// it first creates the bucket.
func (s *Server) waitWritable(create bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), startLimit)
	defer cancel()
	c := s.client()
	var last error
	for {
		if last = s.probe(ctx, c, create); last == nil {
			return nil
		}
		s.mu.Lock()
		done := s.done
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("s3test: SeaweedFS not writable after %v: %w\n%s", startLimit, last, s.LogTail(4096))
		case <-done:
			return fmt.Errorf("s3test: SeaweedFS exited while starting (last probe: %v)\n%s", last, s.LogTail(4096))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// probe creates the bucket (when create), then writes and deletes one
// small object.
func (s *Server) probe(ctx context.Context, c *s3.Client, create bool) error {
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if create {
		_, err := c.CreateBucket(pctx, &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)})
		var api smithy.APIError
		if err != nil && !(errors.As(err, &api) && api.ErrorCode() == "BucketAlreadyOwnedByYou") {
			return fmt.Errorf("create bucket: %w", err)
		}
	}
	// A fresh key each time: a PUT abandoned by an earlier probe may
	// still hold its key's write lock in the filer.
	key := aws.String(".s3test-probe-" + strconv.FormatInt(time.Now().UnixNano(), 36))
	if _, err := c.PutObject(pctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: key, Body: bytes.NewReader([]byte("probe"))}); err != nil {
		return fmt.Errorf("put probe: %w", err)
	}
	if _, err := c.DeleteObject(pctx, &s3.DeleteObjectInput{Bucket: aws.String(s.Bucket), Key: key}); err != nil {
		return fmt.Errorf("delete probe: %w", err)
	}
	return nil
}

// freePorts finds eight distinct loopback ports nobody listens on now,
// holding each open until all are found so that none is found twice.
func freePorts() (ports, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ns [8]int
	for i := range ns {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return ports{}, fmt.Errorf("s3test: free port: %w", err)
		}
		ls = append(ls, l)
		ns[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports{ns[0], ns[1], ns[2], ns[3], ns[4], ns[5], ns[6], ns[7]}, nil
}
