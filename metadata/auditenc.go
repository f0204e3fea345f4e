package metadata

import (
	"encoding/json"
	"strconv"
)

// appendAuditValue appends the stored form of an audit record to buf:
// byte for byte what json.Marshal makes of av, without reflection. The
// trail takes one record per change, so the encoding runs once for every
// mutating FUSE request; readers still decode with encoding/json.
func appendAuditValue(buf []byte, av *auditValue) []byte {
	buf = append(buf, '{')
	first := true
	key := func(name string) {
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(buf, '"')
		buf = append(buf, name...)
		buf = append(buf, '"', ':')
	}
	str := func(name, v string, always bool) {
		if v == "" && !always {
			return
		}
		key(name)
		buf = appendJSONString(buf, v)
	}
	num := func(name string, v uint64, neg bool) {
		if v == 0 {
			return
		}
		key(name)
		if neg {
			buf = append(buf, '-')
		}
		buf = strconv.AppendUint(buf, v, 10)
	}
	// The order and names of auditValue's fields and tags.
	str("u", av.User, false)
	str("v", av.View, false)
	str("z", av.Zone, false)
	str("p", av.Path, false)
	str("o", av.Op, true)
	str("r", av.Result, false)
	str("w", av.Rule, false)
	if av.Bytes < 0 {
		num("b", uint64(-av.Bytes), true)
	} else {
		num("b", uint64(av.Bytes), false)
	}
	num("n", av.Dropped, false)
	str("l", av.Link, false)
	str("c", av.Client, false)
	str("h", av.SHA256, false)
	str("s", av.Scan, false)
	str("e", av.Session, false)
	str("g", av.Door, false)
	str("k", av.Token, false)
	str("q", av.TokenR, false)
	str("d", av.Host, false)
	return append(buf, '}')
}

// appendJSONString appends s quoted as encoding/json quotes it. A string
// of printable ASCII that needs no escape (paths, names, ops: nearly all)
// is copied; any other is left to encoding/json, so that escapes, HTML
// characters and invalid UTF-8 come out exactly as json.Marshal writes
// them.
func appendJSONString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, err := json.Marshal(s)
			if err != nil {
				// A string always marshals; keep the record readable.
				return strconv.AppendQuote(buf, s)
			}
			return append(buf, q...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}
