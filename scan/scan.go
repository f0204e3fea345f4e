// Package scan is a small client of ClamAV's clamd: it sends content over
// the INSTREAM protocol and returns the verdict. It exists so that the
// daemon scans with a real scanner without linking one; it knows nothing
// of inodes or stores.
package scan

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// Addr is where clamd listens: a network ("unix" or "tcp") and an address.
type Addr struct {
	Network string
	Address string
}

// ParseAddr reads "unix:/path/clamd.ctl" or "tcp:host:port", the form of
// the --clamd flag.
func ParseAddr(s string) (Addr, error) {
	network, address, ok := strings.Cut(s, ":")
	if !ok || address == "" || (network != "unix" && network != "tcp") {
		return Addr{}, fmt.Errorf("clamd address %q: want unix:/path or tcp:host:port", s)
	}
	return Addr{Network: network, Address: address}, nil
}

// String is the address in the form ParseAddr reads.
func (a Addr) String() string { return a.Network + ":" + a.Address }

// Verdict is clamd's answer for one stream: clean, or infected with the
// name of the signature that matched.
type Verdict struct {
	Infected  bool
	Signature string
}

// ErrRefused is returned (wrapped) when clamd answered but would not scan
// the stream, such as a stream over its StreamMaxLength; the file, not
// the scanner, is the problem.
var ErrRefused = errors.New("clamd refused the stream")

// Client talks to one clamd. Every call opens its own connection, so a
// Client is safe for concurrent use and survives clamd restarts.
type Client struct {
	addr Addr
	// Timeout bounds one whole call (connect, send, answer).
	Timeout time.Duration
}

// New returns a client of the clamd at addr.
func New(addr Addr) *Client {
	return &Client{addr: addr, Timeout: 2 * time.Minute}
}

// chunkSize is the size of the INSTREAM chunks sent.
const chunkSize = 64 << 10

// Scan streams r to clamd and returns its verdict. An error means no
// verdict: clamd unreachable, too slow, or (ErrRefused) unwilling.
func (c *Client) Scan(ctx context.Context, r io.Reader) (Verdict, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return Verdict{}, err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("zINSTREAM\x00")); err != nil {
		return Verdict{}, fmt.Errorf("clamd %s: send: %w", c.addr, err)
	}
	if err := sendChunks(conn, r); err != nil {
		// clamd may have cut the stream short with an answer (size limit).
		if reply, rerr := readReply(conn); rerr == nil {
			return parseReply(reply)
		}
		return Verdict{}, fmt.Errorf("clamd %s: %w", c.addr, err)
	}
	reply, err := readReply(conn)
	if err != nil {
		return Verdict{}, fmt.Errorf("clamd %s: %w", c.addr, err)
	}
	return parseReply(reply)
}

// Ping checks that clamd answers.
func (c *Client) Ping(ctx context.Context) error {
	conn, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("zPING\x00")); err != nil {
		return fmt.Errorf("clamd %s: send: %w", c.addr, err)
	}
	reply, err := readReply(conn)
	if err != nil {
		return fmt.Errorf("clamd %s: %w", c.addr, err)
	}
	if reply != "PONG" {
		return fmt.Errorf("clamd %s: ping answered %q", c.addr, reply)
	}
	return nil
}

func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, c.addr.Network, c.addr.Address)
	if err != nil {
		return nil, fmt.Errorf("clamd %s: %w", c.addr, err)
	}
	deadline := time.Now().Add(c.Timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	conn.SetDeadline(deadline)
	return conn, nil
}

// sendChunks writes r as INSTREAM chunks (a 4-byte big-endian length,
// then the bytes) and the zero-length chunk that ends the stream.
func sendChunks(w io.Writer, r io.Reader) error {
	buf := make([]byte, 4+chunkSize)
	for {
		n, err := io.ReadFull(r, buf[4:])
		if n > 0 {
			binary.BigEndian.PutUint32(buf[:4], uint32(n))
			if _, werr := w.Write(buf[:4+n]); werr != nil {
				return fmt.Errorf("send: %w", werr)
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read content: %w", err)
		}
	}
	if _, err := w.Write([]byte{0, 0, 0, 0}); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return nil
}

// readReply reads one NUL-terminated answer.
func readReply(r io.Reader) (string, error) {
	s, err := bufio.NewReader(r).ReadString(0)
	if err != nil {
		return "", fmt.Errorf("read answer: %w", err)
	}
	return strings.TrimSuffix(s, "\x00"), nil
}

// parseReply turns "stream: OK", "stream: NAME FOUND" or "... ERROR" into
// a verdict.
func parseReply(reply string) (Verdict, error) {
	body := reply
	if i := strings.Index(reply, ": "); i >= 0 {
		body = reply[i+2:]
	}
	switch {
	case body == "OK":
		return Verdict{}, nil
	case strings.HasSuffix(body, " FOUND"):
		return Verdict{Infected: true, Signature: strings.TrimSuffix(body, " FOUND")}, nil
	case strings.HasSuffix(body, " ERROR"):
		return Verdict{}, fmt.Errorf("%w: %s", ErrRefused, strings.TrimSuffix(body, " ERROR"))
	}
	return Verdict{}, fmt.Errorf("clamd: unexpected answer %q", bytes.TrimSpace([]byte(reply)))
}
