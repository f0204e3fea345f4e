package fuseuring

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestHeaderLayout(t *testing.T) {
	// struct fuse_uring_req_header: in_out[128], op_in[128],
	// struct fuse_uring_ent_in_out (32 bytes).
	if HeaderSize != 288 {
		t.Fatalf("HeaderSize %d, want 288", HeaderSize)
	}
	if got := PayloadSize(1<<20, 256, 4096); got != 1<<20 {
		t.Errorf("payload for 1 MiB writes: %d", got)
	}
	if got := PayloadSize(4096, 1, 4096); got != 8192 {
		t.Errorf("payload never below FUSE_MIN_READ_BUFFER: %d", got)
	}
}

func TestURingCmdEncoding(t *testing.T) {
	sqe := make([]byte, sqeSize)
	encodeURingCmd(sqe, 7, cmdCommitAndFetch, 0x1000, 3, cmdReq{commitID: 42, qid: 1})
	if sqe[0] != opURingCmd || binary.LittleEndian.Uint32(sqe[4:]) != 7 || binary.LittleEndian.Uint32(sqe[8:]) != cmdCommitAndFetch {
		t.Errorf("opcode/fd/cmd_op: % x", sqe[:16])
	}
	if binary.LittleEndian.Uint64(sqe[16:]) != 0x1000 || binary.LittleEndian.Uint32(sqe[24:]) != 2 || binary.LittleEndian.Uint64(sqe[32:]) != 3 {
		t.Errorf("addr/len/user_data: % x", sqe[16:40])
	}
	if got := decodeCmdReq(sqe[sqeCmdOffset:]); got != (cmdReq{commitID: 42, qid: 1}) {
		t.Errorf("cmd req round trip: %+v", got)
	}
}

// kernelRequest lays a request out as fs/fuse/dev_uring.c does: the
// in-header in in_out, the first argument in op_in, the rest in the
// payload, its size in ring_ent_in_out.
func kernelRequest(opcode uint32, unique, node uint64, op, rest []byte) (hdr, payload []byte) {
	hdr, payload = make([]byte, HeaderSize), make([]byte, 8192)
	binary.LittleEndian.PutUint32(hdr[0:], uint32(inHeaderSize+len(op)+len(rest)))
	binary.LittleEndian.PutUint32(hdr[4:], opcode)
	binary.LittleEndian.PutUint64(hdr[8:], unique)
	binary.LittleEndian.PutUint64(hdr[16:], node)
	copy(hdr[inOutSize:], op)
	copy(payload, rest)
	writeEntInOut(hdr, entInOut{commitID: unique, payloadSz: uint32(len(rest))})
	return hdr, payload
}

func TestParseRequestRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name     string
		opcode   uint32
		op, rest []byte
	}{
		{"lookup: no op header, a name", 1, nil, []byte("name\x00")},
		{"getattr: op header only", 3, make([]byte, 16), nil},
		{"write: header and data", 16, bytes.Repeat([]byte{1}, 40), bytes.Repeat([]byte{9}, 5000)},
		{"rename2: header and two names", 45, make([]byte, 16), []byte("a\x00b\x00")},
	} {
		hdr, payload := kernelRequest(c.opcode, 77, 5, c.op, c.rest)
		r, err := parseRequest(hdr, payload)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if r.opcode != c.opcode || r.unique != 77 || r.nodeID != 5 || r.commitID != 77 {
			t.Errorf("%s: %+v", c.name, r)
		}
		if len(r.opHeader) != len(c.op) || !bytes.Equal(r.payload, c.rest) {
			t.Errorf("%s: op header %d bytes, payload %q", c.name, len(r.opHeader), r.payload)
		}
		if got := len(r.inHeader) + len(r.opHeader) + len(r.payload); got != r.streamLen {
			t.Errorf("%s: the stream is %d bytes, header says %d", c.name, got, r.streamLen)
		}
	}
}

func TestParseRequestRefusesInconsistentSizes(t *testing.T) {
	hdr, payload := kernelRequest(16, 1, 1, make([]byte, 40), make([]byte, 100))
	writeEntInOut(hdr, entInOut{commitID: 1, payloadSz: 9000}) // more than the buffer
	if _, err := parseRequest(hdr, payload); err == nil {
		t.Error("payload larger than its buffer accepted")
	}
	hdr, payload = kernelRequest(16, 1, 1, make([]byte, 40), make([]byte, 100))
	binary.LittleEndian.PutUint32(hdr[0:], 20) // shorter than the header
	if _, err := parseRequest(hdr, payload); err == nil {
		t.Error("length shorter than the in-header accepted")
	}
}

// TestReplyEncoding commits replies of every size up to the payload
// buffer: the out header's len and payload_sz describe what was written.
func TestReplyEncoding(t *testing.T) {
	hdr := make([]byte, HeaderSize)
	for _, n := range []int{0, 1, 16, 4096, 1 << 20} {
		setReply(hdr, 9, outHeaderSize+n)
		e := readEntInOut(hdr)
		if e.commitID != 9 || int(e.payloadSz) != n || binary.LittleEndian.Uint32(hdr[0:]) != uint32(outHeaderSize+n) {
			t.Errorf("reply of %d: %+v len %d", n, e, binary.LittleEndian.Uint32(hdr[0:]))
		}
	}
	setError(hdr, 5, 5, 4) // EINTR
	if int32(binary.LittleEndian.Uint32(hdr[4:])) != -4 || binary.LittleEndian.Uint64(hdr[8:]) != 5 || readEntInOut(hdr).payloadSz != 0 {
		t.Errorf("error reply: % x", hdr[:16])
	}
}

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string]int{"0": 1, "0-1": 2, "0-3,8-9": 6, "0,2": 2} {
		if got, err := parseCPUList(in); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a", "3-1"} {
		if _, err := parseCPUList(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
