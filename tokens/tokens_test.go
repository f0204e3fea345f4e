package tokens

import (
	"errors"
	"strings"
	"testing"
)

func TestNewSplitMatch(t *testing.T) {
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.Token, "shedfs_"+m.ID+"_") {
		t.Fatalf("token %q does not carry its id %q", m.Token, m.ID)
	}
	id, secret, err := Split(m.Token)
	if err != nil || id != m.ID {
		t.Fatalf("Split = %q, %v", id, err)
	}
	if !Matches(m.Hash, secret) {
		t.Fatal("the secret does not match its hash")
	}
	if strings.Contains(m.Hash, secret) {
		t.Fatal("the hash carries the secret")
	}
	other, _ := New()
	if other.ID == m.ID || other.Token == m.Token {
		t.Fatal("two tokens alike")
	}
	_, s2, _ := Split(other.Token)
	if Matches(m.Hash, s2) {
		t.Fatal("another token's secret matches")
	}
	if err := ValidID(m.ID); err != nil {
		t.Fatal(err)
	}
}

func TestSplitMalformed(t *testing.T) {
	m, _ := New()
	for _, tok := range []string{
		"", "shedfs_", "Bearer " + m.Token, strings.ToUpper(m.Token), m.Token + "x", m.Token[:len(m.Token)-1],
		strings.Replace(m.Token, "_", "-", -1), "shedfs_" + m.ID, "other_" + m.ID + "_abc",
		"shedfs_" + m.ID + "_" + strings.Repeat("1", 52),
	} {
		if _, _, err := Split(tok); !errors.Is(err, ErrMalformed) {
			t.Errorf("Split(%q) = %v, want ErrMalformed", tok, err)
		}
	}
	for _, id := range []string{"", "abc", strings.Repeat("a", 17), strings.Repeat("A", 16), strings.Repeat("1", 16)} {
		if ValidID(id) == nil {
			t.Errorf("ValidID(%q) passed", id)
		}
	}
}
