// Package clamdtest starts a real clamd for tests, with a signature
// database the test writes itself (no network, no freshclam): the EICAR
// test file's hash and one custom body signature. It is shared by the
// scan client's tests and the integration tests so that both meet the
// same scanner.
package clamdtest

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// EICAR is the standard antivirus test file; the database matches it by
// hash as EICARSignature.
const EICAR = `X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*`

// EICARSignature is the name clamd reports for EICAR (clamd marks
// signatures of an unsigned database .UNOFFICIAL).
const EICARSignature = eicarName + ".UNOFFICIAL"

const eicarName = "Shedfs.Test.EICAR"

// BodyMarker anywhere in a file makes clamd report BodySignature.
const BodyMarker = "SHEDFS-TEST-MALWARE-BODY-7f3a"

// BodySignature is the name clamd reports for BodyMarker.
const BodySignature = bodyName + ".UNOFFICIAL"

const bodyName = "Shedfs.Test.Body"

// Clamd is one clamd process started by Start.
type Clamd struct {
	// Socket is the path of its unix socket.
	Socket string
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Addr is the socket in the form of the --clamd flag.
func (c *Clamd) Addr() string { return "unix:" + c.Socket }

// Start writes a database and a configuration under dir and starts clamd
// in the foreground, waiting until its socket answers. It fails when
// clamd is not installed.
func Start(dir string) (*Clamd, error) {
	bin, err := exec.LookPath("clamd")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/clamd"); serr != nil {
			return nil, fmt.Errorf("clamd not installed (Debian package clamav-daemon): %w", err)
		}
		bin = "/usr/sbin/clamd"
	}
	c := &Clamd{Socket: filepath.Join(dir, "clamd.sock"), dir: dir}
	if err := c.writeFiles(); err != nil {
		return nil, err
	}
	if err := c.start(bin); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Clamd) writeFiles() error {
	db := filepath.Join(c.dir, "db")
	tmp := filepath.Join(c.dir, "tmp")
	for _, d := range []string{db, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("clamd dirs: %w", err)
		}
	}
	sum := md5.Sum([]byte(EICAR))
	hdb := fmt.Sprintf("%s:%d:%s\n", hex.EncodeToString(sum[:]), len(EICAR), eicarName)
	ndb := fmt.Sprintf("%s:0:*:%s\n", bodyName, hex.EncodeToString([]byte(BodyMarker)))
	conf := fmt.Sprintf(`LocalSocket %s
LocalSocketMode 666
DatabaseDirectory %s
TemporaryDirectory %s
Foreground yes
LogFile %s
LogTime yes
StreamMaxLength 100M
MaxThreads 4
SelfCheck 0
`, c.Socket, db, tmp, filepath.Join(c.dir, "clamd.log"))
	files := map[string]string{
		filepath.Join(db, "shedfs-test.hdb"): hdb,
		filepath.Join(db, "shedfs-test.ndb"): ndb,
		filepath.Join(c.dir, "clamd.conf"):   conf,
	}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			return fmt.Errorf("clamd files: %w", err)
		}
	}
	return nil
}

func (c *Clamd) start(bin string) error {
	os.Remove(c.Socket)
	cmd := exec.Command(bin, "--foreground", "--config-file="+filepath.Join(c.dir, "clamd.conf"))
	out, err := os.Create(filepath.Join(c.dir, "clamd.out"))
	if err != nil {
		return fmt.Errorf("clamd output: %w", err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start clamd: %w", err)
	}
	out.Close()
	c.cmd = cmd
	c.exited = make(chan struct{})
	go func() { cmd.Wait(); close(c.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-c.exited:
			log, _ := os.ReadFile(filepath.Join(c.dir, "clamd.out"))
			return fmt.Errorf("clamd exited at start: %s", log)
		default:
		}
		if conn, err := net.Dial("unix", c.Socket); err == nil {
			conn.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.Stop()
	return errors.New("clamd did not answer within 60 s")
}

// Stop ends clamd and waits for it; Restart brings it back on the same
// socket and database.
func (c *Clamd) Stop() {
	if c.cmd == nil {
		return
	}
	c.cmd.Process.Kill()
	<-c.exited
	c.cmd = nil
	os.Remove(c.Socket)
}

// Restart starts a stopped clamd again.
func (c *Clamd) Restart() error {
	bin := "clamd"
	if p, err := exec.LookPath("clamd"); err == nil {
		bin = p
	} else {
		bin = "/usr/sbin/clamd"
	}
	return c.start(bin)
}
