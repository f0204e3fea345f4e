// Package textdiff writes the unified diff of two texts, for showing a
// person what an agent changed (shedfs session diff --patch). It finds a
// shortest edit script by Myers' algorithm and gives up, with a diff that
// replaces everything, beyond a bound on the edits, so that a diff of two
// unrelated large texts costs no more than reading them.
package textdiff

import (
	"fmt"
	"strings"
)

// maxEdits bounds the search: past it the texts are shown as replaced.
const maxEdits = 4000

// context is the number of unchanged lines around a change.
const context = 3

type kind byte

const (
	same kind = ' '
	del  kind = '-'
	add  kind = '+'
)

type edit struct {
	k    kind
	line string
}

// Lines splits s into lines, each with its "\n" (the last may have none).
func Lines(s string) []string {
	if s == "" {
		return nil
	}
	ls := strings.SplitAfter(s, "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// script is the edits from a to b: a shortest one when it is within
// maxEdits, else all of a removed and all of b added.
func script(a, b []string) []edit {
	n, m := len(a), len(b)
	bound := min(n+m, maxEdits)
	off := bound + 1
	v := make([]int, 2*bound+3)
	var trace [][]int
	for d := 0; d <= bound; d++ {
		trace = append(trace, append([]int(nil), v...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(a, b, trace, off)
			}
		}
	}
	out := make([]edit, 0, n+m)
	for _, l := range a {
		out = append(out, edit{del, l})
	}
	for _, l := range b {
		out = append(out, edit{add, l})
	}
	return out
}

// backtrack walks the search's trace back from the end to the start.
func backtrack(a, b []string, trace [][]int, off int) []edit {
	var rev []edit
	x, y := len(a), len(b)
	for d := len(trace) - 1; d >= 0; d-- {
		v := trace[d]
		k := x - y
		prevK := k - 1
		if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
			prevK = k + 1
		}
		prevX := v[off+prevK]
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			rev = append(rev, edit{same, a[x-1]})
			x, y = x-1, y-1
		}
		if d > 0 {
			if x == prevX {
				rev = append(rev, edit{add, b[y-1]})
			} else {
				rev = append(rev, edit{del, a[x-1]})
			}
		}
		x, y = prevX, prevY
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

// Unified is the unified diff from text a (named aName) to text b (bName),
// "" when they are the same. An empty name is /dev/null (a file added or
// removed).
func Unified(aName, bName, a, b string) string {
	if a == b {
		return ""
	}
	es := script(Lines(a), Lines(b))
	var sb strings.Builder
	if aName == "" {
		aName = "/dev/null"
	}
	if bName == "" {
		bName = "/dev/null"
	}
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", aName, bName)
	for start := 0; start < len(es); {
		first := nextChange(es, start)
		if first == len(es) {
			break
		}
		lo := max(first-context, start)
		hi := hunkEnd(es, first)
		writeHunk(&sb, es, lo, hi)
		start = hi
	}
	return sb.String()
}

// nextChange is the index of the first edit at or after i that is not
// same, len(es) if none.
func nextChange(es []edit, i int) int {
	for i < len(es) && es[i].k == same {
		i++
	}
	return i
}

// hunkEnd is where the hunk that holds the change at first ends: changes
// closer than two contexts apart share one hunk.
func hunkEnd(es []edit, first int) int {
	i := first
	for {
		for i < len(es) && es[i].k != same {
			i++
		}
		next := nextChange(es, i)
		if next == len(es) || next-i > 2*context {
			return min(i+context, len(es))
		}
		i = next
	}
}

// writeHunk writes the edits es[lo:hi] as one hunk.
func writeHunk(sb *strings.Builder, es []edit, lo, hi int) {
	aStart, bStart := 1, 1
	for _, e := range es[:lo] {
		if e.k != add {
			aStart++
		}
		if e.k != del {
			bStart++
		}
	}
	var aLen, bLen int
	for _, e := range es[lo:hi] {
		if e.k != add {
			aLen++
		}
		if e.k != del {
			bLen++
		}
	}
	fmt.Fprintf(sb, "@@ -%s +%s @@\n", span(aStart, aLen), span(bStart, bLen))
	for _, e := range es[lo:hi] {
		sb.WriteByte(byte(e.k))
		sb.WriteString(e.line)
		if !strings.HasSuffix(e.line, "\n") {
			sb.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// span is a hunk's range as diff writes it: "start,len", with start one
// before the position when the range is empty.
func span(start, n int) string {
	if n == 0 {
		start--
	}
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}
