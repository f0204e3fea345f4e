// Package tokens makes and checks the bearer tokens of the agent doors
// (the MCP server over HTTP and the file API). A token is printed once
// when it is made: the store keeps only the SHA-256 of its secret beside
// the grant it carries, so a copy of the store opens nothing.
//
// A token reads "shedfs_<id>_<secret>": the id names the record (it is
// what `token list` and the audit trail show, and what `token revoke`
// takes), the secret proves the bearer was given it.
package tokens

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

const (
	prefix    = "shedfs_"
	idBytes   = 10 // 16 characters of base32
	secretLen = 32 // 52 characters of base32
)

var enc = base32.StdEncoding.WithPadding(base32.NoPadding)

// ErrMalformed is a token that is not of the form shedfs_<id>_<secret>.
var ErrMalformed = errors.New("not a shedfs token (shedfs_<id>_<secret>)")

// Made is a new token: Token is given to its bearer once, ID and Hash are
// stored.
type Made struct {
	Token string
	ID    string
	Hash  string
}

// New makes a token with a fresh id and secret.
func New() (Made, error) {
	id := make([]byte, idBytes)
	secret := make([]byte, secretLen)
	if _, err := rand.Read(id); err != nil {
		return Made{}, fmt.Errorf("token id: %w", err)
	}
	if _, err := rand.Read(secret); err != nil {
		return Made{}, fmt.Errorf("token secret: %w", err)
	}
	ids := strings.ToLower(enc.EncodeToString(id))
	ss := strings.ToLower(enc.EncodeToString(secret))
	return Made{Token: prefix + ids + "_" + ss, ID: ids, Hash: Hash(ss)}, nil
}

// Split returns the id and secret of a token, ErrMalformed if it is none.
func Split(token string) (id, secret string, err error) {
	rest, ok := strings.CutPrefix(token, prefix)
	if !ok {
		return "", "", ErrMalformed
	}
	id, secret, ok = strings.Cut(rest, "_")
	if !ok || ValidID(id) != nil || len(secret) != enc.EncodedLen(secretLen) || !lowerBase32(secret) {
		return "", "", ErrMalformed
	}
	return id, secret, nil
}

// ValidID checks the form of a token id.
func ValidID(id string) error {
	if len(id) != enc.EncodedLen(idBytes) || !lowerBase32(id) {
		return fmt.Errorf("%q is not a token id (token list shows them)", id)
	}
	return nil
}

// Hash is what the store keeps of a secret.
func Hash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// Matches reports, in constant time, whether secret is the one hash was
// made of.
func Matches(hash, secret string) bool {
	got := Hash(secret)
	return subtle.ConstantTimeCompare([]byte(got), []byte(hash)) == 1
}

func lowerBase32(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// Doors are the doors a token can be limited to: the MCP server over
// HTTP, and the file API.
var Doors = []string{"mcp", "api"}
