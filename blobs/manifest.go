package blobs

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// In a bucket, a blob is a set of immutable objects: its content in chunks
// of a fixed size, c/<ino>/<version>/<index>, and a manifest,
// m/<ino>/<version>, that lists the chunk objects of one content version.
// Nothing is ever overwritten: a change uploads the chunks it touched and
// then a new manifest naming them and the unchanged chunks of the version
// before, so a crash mid-upload leaves the old manifest whole, and a
// reader that fetched a manifest reads that version's chunks, never a mix.
// The current content of an inode is its manifest with the highest
// version.

// manifest is one content version of an inode.
type manifest struct {
	// Size is the content's length in bytes.
	Size int64 `json:"size"`
	// Chunk is the chunk size the content was cut into.
	Chunk int64 `json:"chunk"`
	// Keys are the objects of chunks 0, 1, …; "" is a chunk of zeros that
	// was never uploaded.
	Keys []string `json:"keys"`
	// Ver is the content version, increasing with each upload.
	Ver uint64 `json:"ver"`
}

// chunks is how many chunks of size chunk hold size bytes.
func chunks(size, chunk int64) int64 { return (size + chunk - 1) / chunk }

// keyOf returns chunk i's object of the version, "" past its end.
func (m *manifest) keyOf(i int64) string {
	if m == nil || i >= int64(len(m.Keys)) {
		return ""
	}
	return m.Keys[i]
}

const (
	manifestPrefix = "m/"
	chunkPrefix    = "c/"
)

// manifestDir is the prefix of every manifest of ino.
func manifestDir(ino uint64) string {
	return manifestPrefix + strconv.FormatUint(ino, 10) + "/"
}

// manifestKey is where version ver of ino's manifest lies; the version is
// 16 hex digits, so the keys sort as the versions do.
func manifestKey(ino, ver uint64) string {
	return fmt.Sprintf("%s%016x", manifestDir(ino), ver)
}

// chunkKey is where chunk i of version ver of ino lies.
func chunkKey(ino, ver uint64, i int64) string {
	return fmt.Sprintf("%s%d/%016x/%d", chunkPrefix, ino, ver, i)
}

// parseManifestKey returns the inode and version a manifest key names.
func parseManifestKey(key string) (ino, ver uint64, ok bool) {
	rest, found := strings.CutPrefix(key, manifestPrefix)
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, false
	}
	ino, err1 := strconv.ParseUint(a, 10, 64)
	ver, err2 := strconv.ParseUint(b, 16, 64)
	return ino, ver, err1 == nil && err2 == nil
}

func encodeManifest(m *manifest) []byte {
	b, _ := json.Marshal(m) // a struct of plain fields cannot fail
	return b
}

func decodeManifest(b []byte) (*manifest, error) {
	m := new(manifest)
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if m.Chunk <= 0 || m.Size < 0 || int64(len(m.Keys)) != chunks(m.Size, m.Chunk) {
		return nil, fmt.Errorf("manifest: %d keys for %d bytes in chunks of %d", len(m.Keys), m.Size, m.Chunk)
	}
	return m, nil
}
