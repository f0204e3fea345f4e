package links

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

func testKey(b byte) Key {
	k := make(Key, KeySize)
	for i := range k {
		k[i] = b + byte(i)
	}
	return k
}

var t0 = time.Unix(1_800_000_000, 0)

func TestVerify(t *testing.T) {
	k := testKey(1)
	id := ID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	tok := Token{ID: id, Expires: t0.Add(time.Hour)}
	s := Sign(k, tok)
	for _, tc := range []struct {
		name string
		key  Key
		s    string
		now  time.Time
		want error
	}{
		{"valid", k, s, t0, nil},
		{"valid a second before expiry", k, s, t0.Add(time.Hour - time.Second), nil},
		{"expired at expiry", k, s, t0.Add(time.Hour), ErrExpired},
		{"expired later", k, s, t0.Add(48 * time.Hour), ErrExpired},
		{"rotated key", testKey(2), s, t0, ErrSignature},
		{"empty", k, "", t0, ErrMalformed},
		{"truncated", k, s[:len(s)-1], t0, ErrMalformed},
		{"longer", k, s + "A", t0, ErrMalformed},
		{"not base64", k, "!" + s[1:], t0, ErrMalformed},
		{"padded", k, s[:len(s)-2] + "==", t0, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Verify(tc.key, tc.s, tc.now)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify: %v, want %v", err, tc.want)
			}
			if tc.want == nil && (got.ID != id || !got.Expires.Equal(tok.Expires)) {
				t.Fatalf("Verify = %+v, want %+v", got, tok)
			}
		})
	}
}

// TestTamper flips every bit of every byte of a token: none verifies.
func TestTamper(t *testing.T) {
	k := testKey(1)
	tok := Token{ID: ID{9, 9, 9}, Expires: t0.Add(time.Hour)}
	raw, err := base64.RawURLEncoding.DecodeString(Sign(k, tok))
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		for bit := range 8 {
			b := append([]byte(nil), raw...)
			b[i] ^= 1 << bit
			s := base64.RawURLEncoding.EncodeToString(b)
			if _, err := Verify(k, s, t0); err == nil {
				t.Fatalf("byte %d bit %d flipped: token still verifies", i, bit)
			}
		}
	}
	// And every character of the string form, replaced by another.
	s := Sign(k, tok)
	for i := range s {
		c := byte('A')
		if s[i] == 'A' {
			c = 'B'
		}
		m := s[:i] + string(c) + s[i+1:]
		if _, err := Verify(k, m, t0); err == nil {
			t.Fatalf("character %d changed: token still verifies", i)
		}
	}
}

func TestCheckRevocation(t *testing.T) {
	k := testKey(1)
	rec := Record{ID: ID{7}, User: "alice", Ino: 42, Expires: t0.Add(time.Hour)}
	s := Sign(k, TokenOf(rec))
	found := func(r Record) func(ID) (Record, bool) {
		return func(id ID) (Record, bool) { return r, id == r.ID }
	}
	longer := rec
	longer.Expires = t0.Add(2 * time.Hour)
	// Made under key 1, whose token key 2 signs again (link list after a
	// rotation): rotated, not served.
	k2 := testKey(2)
	under1 := rec
	under1.KeyID = k.KeyID()
	for _, tc := range []struct {
		name   string
		s      string
		lookup func(ID) (Record, bool)
		now    time.Time
		want   error
	}{
		{"live", s, found(rec), t0, nil},
		{"revoked", s, func(ID) (Record, bool) { return Record{}, false }, t0, ErrRevoked},
		{"record of another expiry", s, found(longer), t0, ErrRevoked},
		{"token re-signed longer than its record", Sign(k, TokenOf(longer)), found(rec), t0, ErrRevoked},
		{"expired", s, found(rec), t0.Add(time.Hour), ErrExpired},
		{"forged", Sign(testKey(3), TokenOf(rec)), found(rec), t0, ErrSignature},
		{"made under this key", s, found(under1), t0, nil},
		{"made under the key before", Sign(k2, TokenOf(rec)), found(under1), t0, ErrRotated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := k
			if tc.want == ErrRotated {
				key = k2
			}
			got, err := Check(key, tc.s, tc.now, tc.lookup)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Check: %v, want %v", err, tc.want)
			}
			if tc.want == nil && got.Ino != 42 {
				t.Fatalf("Check = %+v", got)
			}
		})
	}
}

func TestChild(t *testing.T) {
	k := testKey(1)
	tok := Token{ID: ID{5}, Expires: t0.Add(time.Hour)}
	c := SignChild(k, tok, 77, "report.html")
	if dir, err := VerifyChild(k, tok, c, "report.html"); err != nil || dir != 77 {
		t.Fatalf("VerifyChild = %d, %v", dir, err)
	}
	other := Token{ID: ID{6}, Expires: tok.Expires}
	for _, tc := range []struct {
		name string
		key  Key
		tok  Token
		s    string
		file string
		want error
	}{
		{"other name", k, tok, c, "secret.txt", ErrSignature},
		{"other link", k, other, c, "report.html", ErrSignature},
		{"other expiry", k, Token{ID: tok.ID, Expires: t0.Add(2 * time.Hour)}, c, "report.html", ErrSignature},
		{"other directory", k, tok, SignChild(k, tok, 78, "x")[:11] + c[11:], "report.html", ErrSignature},
		{"rotated key", testKey(2), tok, c, "report.html", ErrSignature},
		{"short", k, tok, c[1:], "report.html", ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := VerifyChild(tc.key, tc.tok, tc.s, tc.file); !errors.Is(err, tc.want) {
				t.Fatalf("VerifyChild: %v, want %v", err, tc.want)
			}
		})
	}
	raw, _ := base64.RawURLEncoding.DecodeString(c)
	for i := range raw {
		b := append([]byte(nil), raw...)
		b[i] ^= 0x10
		if _, err := VerifyChild(k, tok, base64.RawURLEncoding.EncodeToString(b), "report.html"); err == nil {
			t.Fatalf("child byte %d flipped: still verifies", i)
		}
	}
}

func TestID(t *testing.T) {
	id, err := NewID()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseID(id.String())
	if err != nil || back != id {
		t.Fatalf("ParseID(%s) = %v, %v", id, back, err)
	}
	for _, s := range []string{"", "abc", id.String() + "AA", "!!!!!!!!!!!!!!!!"} {
		if _, err := ParseID(s); err == nil {
			t.Errorf("ParseID(%q) accepted", s)
		}
	}
}

func TestParseTTL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"2h", 2 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"7d", MaxTTL, true},
		{"1.5d", 36 * time.Hour, true},
		{" 1h\n", time.Hour, true},
		{"8d", 0, false},
		{"169h", 0, false},
		{"0", 0, false},
		{"-1h", 0, false},
		{"500ms", 0, false},
		{"", 0, false},
		{"soon", 0, false},
		{"NaNd", 0, false},
		{"1e300d", 0, false},
	} {
		got, err := ParseTTL(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseTTL(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// FuzzVerify feeds the token parsers anything: they never panic and accept
// nothing not signed with the key.
func FuzzVerify(f *testing.F) {
	k := testKey(1)
	tok := Token{ID: ID{1}, Expires: t0.Add(time.Hour)}
	good := Sign(k, tok)
	f.Add(good, SignChild(k, tok, 3, "a"), "a")
	f.Add("", "", "")
	f.Add(good[:49]+"=", "AAAA", "..")
	f.Fuzz(func(t *testing.T, s, child, name string) {
		got, err := Verify(k, s, t0)
		if err == nil && s != good {
			t.Fatalf("Verify accepted %q as %+v", s, got)
		}
		// A child token verifies only if it is exactly the signed one.
		if dir, err := VerifyChild(k, tok, child, name); err == nil && child != SignChild(k, tok, dir, name) {
			t.Fatalf("VerifyChild accepted %q for %q", child, name)
		}
		_, _ = ParseID(s)
		_, _ = ParseTTL(name)
	})
}

func TestKeyID(t *testing.T) {
	a, b := testKey(1).KeyID(), testKey(2).KeyID()
	if a == b || len(a) != 8 || a != testKey(1).KeyID() {
		t.Fatalf("KeyIDs %q %q", a, b)
	}
}

// A link lives at least its lifetime: tokens carry whole seconds, and the
// expiry is rounded up to one.
func TestExpiry(t *testing.T) {
	for _, tc := range []struct {
		now  time.Time
		ttl  time.Duration
		want time.Time
	}{
		{t0, time.Second, t0.Add(time.Second)},
		{t0.Add(999 * time.Millisecond), time.Second, t0.Add(2 * time.Second)},
		{t0.Add(time.Nanosecond), time.Hour, t0.Add(time.Hour + time.Second)},
		{t0, MaxTTL, t0.Add(MaxTTL)},
	} {
		if got := Expiry(tc.now, tc.ttl); !got.Equal(tc.want) || got.Sub(tc.now) < tc.ttl {
			t.Errorf("Expiry(%v, %v) = %v, want %v", tc.now, tc.ttl, got, tc.want)
		}
	}
}

// TestNewIDNeverAFlag: no ID starts with '-', which a command line reads
// as a flag (link revoke ID).
func TestNewIDNeverAFlag(t *testing.T) {
	for range 5000 {
		id, err := NewID()
		if err != nil {
			t.Fatal(err)
		}
		if s := id.String(); strings.HasPrefix(s, "-") {
			t.Fatalf("NewID made %q", s)
		}
	}
}
