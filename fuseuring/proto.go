package fuseuring

import (
	"encoding/binary"
	"fmt"
)

// The FUSE-over-io_uring ABI (include/uapi/linux/fuse.h, Linux 6.14+).
const (
	// cmdRegister hands the kernel a queue entry's buffers; its
	// completion carries the first request for the entry.
	cmdRegister = 1
	// cmdCommitAndFetch carries the reply to the entry's request and
	// waits for its next request.
	cmdCommitAndFetch = 2

	// Struct fuse_uring_req_header: the in/out header slot, the
	// per-opcode header slot and struct fuse_uring_ent_in_out.
	inOutSize   = 128
	opInSize    = 128
	entInOutOff = inOutSize + opInSize
	entInOutLen = 32
	// HeaderSize is the size of one entry's header buffer.
	HeaderSize = entInOutOff + entInOutLen

	inHeaderSize  = 40 // struct fuse_in_header
	outHeaderSize = 16 // struct fuse_out_header

	// cmdReqSize is struct fuse_uring_cmd_req, in the SQE's command area.
	cmdReqSize = 24

	// minPayload is FUSE_MIN_READ_BUFFER: the kernel never asks for a
	// payload buffer smaller than that.
	minPayload = 8192
)

// PayloadSize is the payload buffer the kernel requires of every entry
// of a connection (fs/fuse/dev_uring.c, fuse_uring_create): room for the
// largest write or read it may send, max(8 KiB, max_write, max_pages
// pages).
func PayloadSize(maxWrite, maxPages, pageSize int) int {
	return max(minPayload, maxWrite, maxPages*pageSize)
}

// cmdReq is struct fuse_uring_cmd_req.
type cmdReq struct {
	flags    uint64
	commitID uint64
	qid      uint16
}

// encodeCmdReq writes c into the command area of a 128-byte SQE.
func encodeCmdReq(cmd []byte, c cmdReq) {
	binary.LittleEndian.PutUint64(cmd[0:], c.flags)
	binary.LittleEndian.PutUint64(cmd[8:], c.commitID)
	binary.LittleEndian.PutUint16(cmd[16:], c.qid)
	clear(cmd[18:cmdReqSize])
}

func decodeCmdReq(cmd []byte) cmdReq {
	return cmdReq{
		flags:    binary.LittleEndian.Uint64(cmd[0:]),
		commitID: binary.LittleEndian.Uint64(cmd[8:]),
		qid:      binary.LittleEndian.Uint16(cmd[16:]),
	}
}

// encodeURingCmd fills sqe (128 bytes, zeroed) with an IORING_OP_URING_CMD
// on the FUSE device fd: op is REGISTER or COMMIT_AND_FETCH, iov points
// at the entry's two iovecs (header and payload), userData names the
// entry in the completion.
func encodeURingCmd(sqe []byte, fd int, op uint32, iov uintptr, userData uint64, c cmdReq) {
	sqe[0] = opURingCmd
	binary.LittleEndian.PutUint32(sqe[4:], uint32(int32(fd)))
	binary.LittleEndian.PutUint32(sqe[8:], op) // cmd_op, in the off union
	binary.LittleEndian.PutUint64(sqe[16:], uint64(iov))
	binary.LittleEndian.PutUint32(sqe[24:], 2) // header and payload
	binary.LittleEndian.PutUint64(sqe[32:], userData)
	encodeCmdReq(sqe[sqeCmdOffset:], c)
}

// entInOut is struct fuse_uring_ent_in_out: the kernel tells the request's
// id (commit_id) and payload size; the reply says its payload size.
type entInOut struct {
	flags     uint64
	commitID  uint64
	payloadSz uint32
}

func readEntInOut(hdr []byte) entInOut {
	b := hdr[entInOutOff:]
	return entInOut{
		flags:     binary.LittleEndian.Uint64(b[0:]),
		commitID:  binary.LittleEndian.Uint64(b[8:]),
		payloadSz: binary.LittleEndian.Uint32(b[16:]),
	}
}

func writeEntInOut(hdr []byte, e entInOut) {
	b := hdr[entInOutOff : entInOutOff+entInOutLen]
	clear(b)
	binary.LittleEndian.PutUint64(b[0:], e.flags)
	binary.LittleEndian.PutUint64(b[8:], e.commitID)
	binary.LittleEndian.PutUint32(b[16:], e.payloadSz)
}

// request is what the kernel put into an entry, as the slices of the
// byte stream /dev/fuse would have delivered: fuse_in_header, the
// per-opcode header, the payload (names, write data).
type request struct {
	opcode    uint32
	unique    uint64
	nodeID    uint64
	inHeader  []byte
	opHeader  []byte
	payload   []byte
	commitID  uint64
	streamLen int
}

// parseRequest reads the request in an entry's buffers. The kernel puts
// the per-opcode header (the first in-argument) in the op_in slot and
// every further argument in the payload buffer; their sizes add up to
// fuse_in_header.len, which is how the op header's size is known without
// a table of opcodes.
func parseRequest(hdr, payload []byte) (request, error) {
	if len(hdr) < HeaderSize {
		return request{}, fmt.Errorf("header buffer of %d bytes, want %d", len(hdr), HeaderSize)
	}
	e := readEntInOut(hdr)
	in := hdr[:inHeaderSize]
	total := int(binary.LittleEndian.Uint32(in[0:]))
	r := request{
		opcode:    binary.LittleEndian.Uint32(in[4:]),
		unique:    binary.LittleEndian.Uint64(in[8:]),
		nodeID:    binary.LittleEndian.Uint64(in[16:]),
		inHeader:  in,
		commitID:  e.commitID,
		streamLen: total,
	}
	if int(e.payloadSz) > len(payload) {
		return r, fmt.Errorf("op %d: payload of %d bytes in a %d-byte buffer", r.opcode, e.payloadSz, len(payload))
	}
	op := total - inHeaderSize - int(e.payloadSz)
	if op < 0 || op > opInSize {
		return r, fmt.Errorf("op %d: length %d with a payload of %d leaves an op header of %d bytes", r.opcode, total, e.payloadSz, op)
	}
	r.opHeader = hdr[inOutSize : inOutSize+op]
	r.payload = payload[:e.payloadSz]
	return r, nil
}

// setReply finishes an entry's reply: written is what the protocol
// handler wrote to the stream [out header slot | payload buffer] (out
// header first, then the reply's arguments in the payload). The kernel
// reads the out header from the in_out slot and payload_sz bytes of
// arguments.
func setReply(hdr []byte, commitID uint64, written int) {
	payload := max(written-outHeaderSize, 0)
	binary.LittleEndian.PutUint32(hdr[0:], uint32(outHeaderSize+payload))
	writeEntInOut(hdr, entInOut{commitID: commitID, payloadSz: uint32(payload)})
}

// setError makes the entry's reply a bare error for unique.
func setError(hdr []byte, unique, commitID uint64, errno int32) {
	clear(hdr[:outHeaderSize])
	binary.LittleEndian.PutUint32(hdr[0:], outHeaderSize)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(-errno))
	binary.LittleEndian.PutUint64(hdr[8:], unique)
	writeEntInOut(hdr, entInOut{commitID: commitID})
}

func putU32(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }
func putU64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }
