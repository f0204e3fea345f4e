// Package links is the format of shedfs's share-by-link tokens: what a URL
// carries so that a person without a view can fetch one file or browse one
// folder, and nothing else. It is pure (no I/O, no clock of its own) so
// that signing, verification, expiry, revocation and key rotation are
// table-tested apart from the HTTP server that uses them.
//
// A link token is version (1 byte), link ID (12 random bytes), expiry
// (unix seconds, 8 bytes) and the first 16 bytes of HMAC-SHA256 over the
// three under the store's link key, in unpadded base64url: 50 characters.
// The token says nothing about the inode it opens: that is in the link's
// record in the store, found by the ID, so deleting the record revokes
// the link and a new key invalidates every token at once.
//
// An entry of a linked folder gets a child token: the directory it lies in
// (8 bytes) and an HMAC over the link's ID and expiry, that directory and
// the entry's name, 32 characters. It is only valid together with its
// link's token, so it expires and is revoked with the folder's link.
package links

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Lifetimes of a link: DefaultTTL unless the store or the caller asks for
// another, never more than MaxTTL, so that a forgotten link dies on its
// own within a week.
const (
	DefaultTTL = 24 * time.Hour
	MaxTTL     = 7 * 24 * time.Hour
	MinTTL     = time.Second
)

// KeySize is the length of a link key in bytes.
const KeySize = 32

const (
	version  = 1
	idSize   = 12
	macSize  = 16
	tokenLen = 1 + idSize + 8 + macSize
	childLen = 8 + macSize
)

// The ways a token fails. The HTTP server answers all of them with 403,
// and names them only in the audit trail.
var (
	ErrMalformed = errors.New("malformed token")
	ErrSignature = errors.New("bad signature")
	ErrExpired   = errors.New("link expired")
	ErrRevoked   = errors.New("link revoked")
	ErrRotated   = errors.New("link key rotated")
)

// Key signs tokens. It lives in the store (the HTTP server keeps the file)
// and is replaced to invalidate every link.
type Key []byte

// NewKey returns a fresh random key.
func NewKey() (Key, error) {
	k := make(Key, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("link key: %w", err)
	}
	return k, nil
}

// KeyID names a key without revealing it: the first 6 bytes of an HMAC
// under it, in base64url (8 characters). A link record keeps the KeyID of
// the key it was made under, so that rotating the key ends the link even
// where its token could be signed again under the new key.
func (k Key) KeyID() string {
	return base64.RawURLEncoding.EncodeToString(mac(k, []byte("key-id"))[:6])
}

// Expiry is when a link made at now to live ttl expires: tokens carry
// whole seconds, so the expiry is rounded up, never down, and the link
// lives at least ttl.
func Expiry(now time.Time, ttl time.Duration) time.Time {
	e := now.Add(ttl)
	if t := e.Truncate(time.Second); !t.Equal(e) {
		return t.Add(time.Second)
	}
	return e
}

// ID names one link; its String is what link list and revoke show.
type ID [idSize]byte

// NewID returns a random link ID.
func NewID() (ID, error) {
	var id ID
	for {
		if _, err := rand.Read(id[:]); err != nil {
			return id, fmt.Errorf("link id: %w", err)
		}
		// Never one that starts with '-' (62, the top six bits of the
		// first byte, in base64url): `shedfs link revoke -Abc...` would
		// read it as a flag.
		if id[0]>>2 != 62 {
			return id, nil
		}
	}
}

// String is the ID in unpadded base64url (16 characters).
func (id ID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// ParseID reads an ID from its String.
func ParseID(s string) (ID, error) {
	var id ID
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != idSize {
		return id, fmt.Errorf("link id %q: %w", s, ErrMalformed)
	}
	copy(id[:], b)
	return id, nil
}

// Token is what a link token asserts: which link, until when.
type Token struct {
	ID      ID
	Expires time.Time
}

// payload is the signed part of a token.
func (t Token) payload() []byte {
	b := make([]byte, 0, tokenLen)
	b = append(b, version)
	b = append(b, t.ID[:]...)
	return binary.BigEndian.AppendUint64(b, uint64(t.Expires.Unix()))
}

func mac(k Key, parts ...[]byte) []byte {
	h := hmac.New(sha256.New, k)
	for _, p := range parts {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	return h.Sum(nil)[:macSize]
}

// Sign returns the token string of t under k.
func Sign(k Key, t Token) string {
	p := t.payload()
	return base64.RawURLEncoding.EncodeToString(append(p, mac(k, []byte("link"), p)...))
}

// Verify checks a token string under k at time now: ErrMalformed,
// ErrSignature (tampered, or signed with another key), or ErrExpired. The
// signature is checked before anything the token claims is believed.
func Verify(k Key, s string, now time.Time) (Token, error) {
	if len(s) != base64.RawURLEncoding.EncodedLen(tokenLen) {
		return Token{}, ErrMalformed
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != tokenLen || b[0] != version {
		return Token{}, ErrMalformed
	}
	p := b[:tokenLen-macSize]
	if !hmac.Equal(b[tokenLen-macSize:], mac(k, []byte("link"), p)) {
		return Token{}, ErrSignature
	}
	var t Token
	copy(t.ID[:], p[1:1+idSize])
	t.Expires = time.Unix(int64(binary.BigEndian.Uint64(p[1+idSize:])), 0)
	if !now.Before(t.Expires) {
		return t, ErrExpired
	}
	return t, nil
}

// Record is what the store keeps of a link: who made it, for which inode,
// until when. The token is valid only while its record exists with the
// same expiry.
type Record struct {
	ID        ID
	User      string
	Ino       uint64
	Created   time.Time
	Expires   time.Time
	Downloads uint64
	// KeyID is the KeyID of the key the link was made under; "" for a
	// record older than KeyIDs, which any key's token may open.
	KeyID string
}

// Check verifies a token string and finds its record with lookup (false
// when the link was revoked or purged): ErrRevoked then, or when the
// record's expiry is not the token's (a token re-signed for a longer life
// than its record still fails); ErrRotated when the record was made under
// another key than k (the key was rotated since).
func Check(k Key, s string, now time.Time, lookup func(ID) (Record, bool)) (Record, error) {
	t, err := Verify(k, s, now)
	if err != nil {
		return Record{}, err
	}
	r, ok := lookup(t.ID)
	if !ok || r.ID != t.ID || r.Expires.Unix() != t.Expires.Unix() {
		return Record{}, ErrRevoked
	}
	if r.KeyID != "" && r.KeyID != k.KeyID() {
		return Record{}, ErrRotated
	}
	if !now.Before(r.Expires) {
		return Record{}, ErrExpired
	}
	return r, nil
}

// TokenOf is the token of a record.
func TokenOf(r Record) Token { return Token{ID: r.ID, Expires: r.Expires} }

// childPayload is what a child token signs.
func childPayload(t Token, dir uint64, name string) [][]byte {
	return [][]byte{[]byte("child"), t.payload(), binary.BigEndian.AppendUint64(nil, dir), []byte(name)}
}

// SignChild returns the child token of the entry name in directory dir,
// under the folder link t.
func SignChild(k Key, t Token, dir uint64, name string) string {
	b := binary.BigEndian.AppendUint64(nil, dir)
	b = append(b, mac(k, childPayload(t, dir, name)...)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// VerifyChild checks the child token s of the entry name under the folder
// link t (itself verified) and returns the directory it names.
func VerifyChild(k Key, t Token, s, name string) (uint64, error) {
	if len(s) != base64.RawURLEncoding.EncodedLen(childLen) {
		return 0, ErrMalformed
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != childLen {
		return 0, ErrMalformed
	}
	dir := binary.BigEndian.Uint64(b[:8])
	if !hmac.Equal(b[8:], mac(k, childPayload(t, dir, name)...)) {
		return 0, ErrSignature
	}
	return dir, nil
}

// ParseTTL reads a link lifetime: a Go duration ("90m", "2h") or a number
// of days ("7d"), between MinTTL and MaxTTL.
func ParseTTL(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseFloat(n, 64)
		if err != nil {
			return 0, fmt.Errorf("link lifetime %q: not a duration", s)
		}
		d = time.Duration(days * float64(24*time.Hour))
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("link lifetime %q: not a duration (like 2h or 7d)", s)
		}
	}
	if d < MinTTL || d > MaxTTL {
		return 0, fmt.Errorf("link lifetime %q: must be between %v and %v", s, MinTTL, MaxTTL)
	}
	return d, nil
}
