package metadata

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// pToken is the prefix of the agent doors' token records ('K' id →
// Token, JSON). Only the hash of a token's secret is kept (package
// tokens); deleting the record revokes the token.
const pToken = 'K'

func tokenKey(id string) []byte { return strKey(pToken, id) }

// Token is one bearer token of the agent doors: who it acts as (a user,
// or one session of that user), the grant it carries (acl.Grant's fields,
// as text), when it ends and why it was made.
type Token struct {
	ID      string `json:"id"`
	Hash    string `json:"hash"`
	User    string `json:"user"`
	Session string `json:"session,omitempty"`
	// UserRoot is the user's private root when the token was made: a user
	// removed and added again under the same name is another user, whom
	// the earlier token must not open.
	UserRoot uint64    `json:"user_root"`
	Root     string    `json:"root,omitempty"`
	Access   string    `json:"access"`
	Allow    []string  `json:"allow,omitempty"`
	Deny     []string  `json:"deny,omitempty"`
	Doors    []string  `json:"doors,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
	LastUsed time.Time `json:"last_used,omitzero"`
}

// PutToken stores a new token record; EEXIST if its id is taken.
func (s *Store) PutToken(t Token) error {
	if t.ID == "" || t.Hash == "" {
		return fmt.Errorf("token without id or hash: %w", syscall.EINVAL)
	}
	return s.update(func(o *op) error {
		if _, err := o.tx.Get(tokenKey(t.ID)); err == nil {
			return fmt.Errorf("token %s: %w", t.ID, syscall.EEXIST)
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		return setJSON(o.tx, tokenKey(t.ID), &t)
	})
}

// GetToken returns the token record id, ENOENT if there is none (never
// made, revoked or purged).
func (s *Store) GetToken(id string) (*Token, error) {
	var t Token
	err := s.kv.View(func(tx Txn) error {
		return getJSON(tx, tokenKey(id), "token", &t)
	})
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// ListTokens returns every token record, in id order.
func (s *Store) ListTokens() ([]Token, error) {
	var out []Token
	err := s.kv.View(func(tx Txn) error {
		return tx.Scan([]byte{pToken}, nil, func(k, v []byte) error {
			var t Token
			if err := getJSONBytes(v, "token", &t); err != nil {
				return err
			}
			out = append(out, t)
			return nil
		})
	})
	return out, err
}

// DeleteToken removes the token record id (revoking it), ENOENT if none.
func (s *Store) DeleteToken(id string) error {
	return s.update(func(o *op) error {
		if _, err := o.tx.Get(tokenKey(id)); errors.Is(err, ErrNotFound) {
			return syscall.ENOENT
		} else if err != nil {
			return err
		}
		return o.tx.Delete(tokenKey(id))
	})
}

// TouchToken records that token id was used at now, at most once a
// minute, so that `token list` tells which tokens are in use without a
// store write per request.
func (s *Store) TouchToken(id string, now time.Time) error {
	return s.update(func(o *op) error {
		var t Token
		if err := getJSON(o.tx, tokenKey(id), "token", &t); err != nil {
			return err
		}
		if now.Sub(t.LastUsed) < time.Minute {
			return nil
		}
		t.LastUsed = now
		return setJSON(o.tx, tokenKey(id), &t)
	})
}

// DropTokens deletes the token records drop chooses (expired ones, those
// of a removed user) and returns how many went.
func (s *Store) DropTokens(drop func(Token) bool) (int, error) {
	ts, err := s.ListTokens()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range ts {
		if !drop(t) {
			continue
		}
		if err := s.DeleteToken(t.ID); err != nil && !errors.Is(err, syscall.ENOENT) {
			return n, err
		}
		n++
	}
	return n, nil
}
