package daemon

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The takeover exchange, on a Unix stream socket beside the admin socket
// (TakeoverSocketPath); lines are text, the handover a length-prefixed
// JSON document whose first byte carries the views' descriptors
// (SCM_RIGHTS):
//
//	new → old  "takeover <version>"
//	old → new  "refused <reason>"  (nothing changed), or the handover
//	new → old  "ready"             (every view adopted, none served yet)
//	old → new  "go"                (the old daemon exits)
//
// Until the old daemon reads "ready" it can take its views back: when the
// new one fails or dies before, it restarts itself in place (Reexec)
// with the handover it made.

// maxHandedViews is how many descriptors one message can carry
// (SCM_MAX_FD); more go in batches.
const maxHandedViews = 253

// TakeoverSocketPath is where a daemon whose admin socket is admin waits
// for the daemon that takes over from it.
func TakeoverSocketPath(admin string) string { return admin + ".takeover" }

// TakeoverConn is one end of a takeover exchange.
type TakeoverConn struct {
	c  *net.UnixConn
	rd *bufio.Reader
}

// NewTakeoverConn wraps an accepted or dialled connection.
func NewTakeoverConn(c *net.UnixConn) *TakeoverConn {
	return &TakeoverConn{c: c, rd: bufio.NewReader(c)}
}

// DialTakeover connects to the daemon serving at the admin socket path
// and asks for its views.
func DialTakeover(admin string) (*TakeoverConn, error) {
	path := TakeoverSocketPath(admin)
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("takeover: no daemon to take over at %s: %w", path, err)
	}
	t := NewTakeoverConn(c)
	if err := t.Send("takeover " + strconv.Itoa(HandoverVersion)); err != nil {
		c.Close()
		return nil, err
	}
	return t, nil
}

// Close ends the exchange.
func (t *TakeoverConn) Close() error { return t.c.Close() }

// Send writes one line.
func (t *TakeoverConn) Send(line string) error {
	if _, err := t.c.Write([]byte(line + "\n")); err != nil {
		return fmt.Errorf("takeover: %w", err)
	}
	return nil
}

// Line reads one line; a closed connection is io.ErrUnexpectedEOF.
func (t *TakeoverConn) Line() (string, error) {
	s, err := t.rd.ReadString('\n')
	if errors.Is(err, io.EOF) {
		return "", fmt.Errorf("takeover: the other daemon went away: %w", io.ErrUnexpectedEOF)
	}
	if err != nil {
		return "", fmt.Errorf("takeover: %w", err)
	}
	return strings.TrimSuffix(s, "\n"), nil
}

// Hello reads the new daemon's request and checks its version.
func (t *TakeoverConn) Hello() error {
	line, err := t.Line()
	if err != nil {
		return err
	}
	if line != "takeover "+strconv.Itoa(HandoverVersion) {
		return fmt.Errorf("takeover: asked %q, this daemon hands over version %d", line, HandoverVersion)
	}
	return nil
}

// Refuse tells the new daemon why it cannot take over; nothing changed.
func (t *TakeoverConn) Refuse(reason error) error {
	return t.Send("R" + reason.Error())
}

// SendHandover writes the handover: a byte carrying the first
// descriptors, the length of the JSON document, the document, then a
// byte per further batch of descriptors (one message carries at most
// maxHandedViews).
func (t *TakeoverConn) SendHandover(h *Handover, fds []int) error {
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("takeover: %w", err)
	}
	first := fds[:min(len(fds), maxHandedViews)]
	if err := t.sendRights('H', first); err != nil {
		return err
	}
	msg := binary.BigEndian.AppendUint64(nil, uint64(len(b)))
	if _, err := t.c.Write(append(msg, b...)); err != nil {
		return fmt.Errorf("takeover: send the handover: %w", err)
	}
	for rest := fds[len(first):]; len(rest) > 0; {
		batch := rest[:min(len(rest), maxHandedViews)]
		if err := t.sendRights('F', batch); err != nil {
			return err
		}
		rest = rest[len(batch):]
	}
	return nil
}

// sendRights writes the byte kind carrying fds.
func (t *TakeoverConn) sendRights(kind byte, fds []int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := t.c.WriteMsgUnix([]byte{kind}, oob, nil); err != nil {
		return fmt.Errorf("takeover: send the handover: %w", err)
	}
	return nil
}

// ReceiveHandover reads what SendHandover wrote, or the old daemon's
// refusal. Nothing may have been read through the line reader before.
func (t *TakeoverConn) ReceiveHandover() (*Handover, []int, error) {
	kind, fds, err := t.receiveRights()
	if err != nil {
		return nil, fds, err
	}
	if kind == 'R' {
		reason, _ := t.Line()
		return nil, nil, fmt.Errorf("takeover refused by the running daemon: %s", reason)
	}
	hdr := make([]byte, 8)
	if _, err := io.ReadFull(t.c, hdr); err != nil {
		return nil, fds, fmt.Errorf("takeover: %w", err)
	}
	b := make([]byte, binary.BigEndian.Uint64(hdr))
	if _, err := io.ReadFull(t.c, b); err != nil {
		return nil, fds, fmt.Errorf("takeover: %w", err)
	}
	var h Handover
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fds, fmt.Errorf("takeover: %w", err)
	}
	for len(fds) < len(h.Views) {
		kind, more, err := t.receiveRights()
		fds = append(fds, more...)
		if err == nil && (kind != 'F' || len(more) == 0) {
			err = fmt.Errorf("takeover: %d views but %d descriptors", len(h.Views), len(fds))
		}
		if err != nil {
			return nil, fds, err
		}
	}
	return &h, fds, nil
}

// receiveRights reads one byte and the descriptors it carries.
func (t *TakeoverConn) receiveRights() (byte, []int, error) {
	kind := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4*maxHandedViews))
	n, oobn, flags, _, err := t.c.ReadMsgUnix(kind, oob)
	if err != nil {
		return 0, nil, fmt.Errorf("takeover: %w", err)
	}
	if n == 0 {
		return 0, nil, fmt.Errorf("takeover: the running daemon went away: %w", io.ErrUnexpectedEOF)
	}
	fds, err := parseRights(oob[:oobn])
	if err == nil && flags&unix.MSG_CTRUNC != 0 {
		err = errors.New("takeover: descriptors lost (control message truncated)")
	}
	return kind[0], fds, err
}

// parseRights returns the descriptors of a control message.
func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("takeover: %w", err)
	}
	var fds []int
	for i := range msgs {
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			return nil, fmt.Errorf("takeover: %w", err)
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

// handoverEnv names, for a daemon restarting itself in place (Reexec),
// the descriptors it inherits: a memfd with the handover, then one per
// view.
const handoverEnv = "SHEDFS_HANDOVER_FDS"

// Reexec restarts the process in place (same pid, same arguments) with
// the handover it made, for the new image to adopt its views again
// (InheritedHandover): what the old daemon does when the new one fails
// before it is ready. It returns only on error.
func Reexec(h *Handover, fds []int) error {
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("restart in place: %w", err)
	}
	mfd, err := unix.MemfdCreate("shedfs-handover", 0)
	if err != nil {
		return fmt.Errorf("restart in place: %w", err)
	}
	if _, err := unix.Pwrite(mfd, b, 0); err != nil {
		return fmt.Errorf("restart in place: %w", err)
	}
	closeFUSEOnExec(fds)
	list := []string{strconv.Itoa(mfd)}
	for _, fd := range fds {
		// Inherited across exec.
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
			return fmt.Errorf("restart in place: %w", err)
		}
		list = append(list, strconv.Itoa(fd))
	}
	env := append(os.Environ(), handoverEnv+"="+strings.Join(list, ","))
	return syscall.Exec("/proc/self/exe", os.Args, env)
}

// closeFUSEOnExec marks every /dev/fuse descriptor of the process but
// the handed ones (keep) close-on-exec. go-fuse opens the descriptor of a
// view it mounts itself without O_CLOEXEC: inherited by the restarted
// image, which never reads it, it would keep alive the connection of a
// view not handed over, whose processes would then wait forever instead
// of getting ENOTCONN while the view is mounted afresh.
func closeFUSEOnExec(keep []int) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || slices.Contains(keep, fd) {
			continue
		}
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == "/dev/fuse" {
			unix.CloseOnExec(fd)
		}
	}
}

// InheritedHandover returns the handover a daemon restarted in place
// (Reexec) inherited, nil when it is a plain start.
func InheritedHandover() (*Handover, []int, error) {
	v := os.Getenv(handoverEnv)
	if v == "" {
		return nil, nil, nil
	}
	os.Unsetenv(handoverEnv)
	var fds []int
	for _, f := range strings.Split(v, ",") {
		fd, err := strconv.Atoi(f)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", handoverEnv, err)
		}
		unix.CloseOnExec(fd)
		fds = append(fds, fd)
	}
	f := os.NewFile(uintptr(fds[0]), "handover")
	defer f.Close()
	var h Handover
	if err := json.NewDecoder(f).Decode(&h); err != nil {
		return nil, nil, fmt.Errorf("inherited handover: %w", err)
	}
	return &h, fds[1:], nil
}

// PeerPid is the process at the other end, 0 when unknown.
func (t *TakeoverConn) PeerPid() int {
	rc, err := t.c.SyscallConn()
	if err != nil {
		return 0
	}
	pid := 0
	rc.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}
