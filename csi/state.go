package csi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// publication is what NodePublishVolume did at one target path, kept in
// a file of the state directory so that NodeUnpublishVolume undoes it
// even after the daemon restarted in between: which session to close,
// and where its files go.
type publication struct {
	VolumeID string `json:"volume_id"`
	Target   string `json:"target"`
	User     string `json:"user"`
	// Session is the session whose view is published, "" for the
	// user's main view.
	Session string `json:"session,omitempty"`
	// Owned: the session was opened by this publication (newSession)
	// and is closed at unpublish, kept in home/sessions/ID with Keep.
	Owned    bool `json:"owned,omitempty"`
	Keep     bool `json:"keep,omitempty"`
	ReadOnly bool `json:"read_only,omitempty"`
	// SingleWriter: published with SINGLE_NODE_SINGLE_WRITER, which
	// allows no other publication of the volume.
	SingleWriter bool `json:"single_writer,omitempty"`
}

// volumeRecord is a volume CreateVolume made: what DeleteVolume needs
// (where the session's files go) and what a retry of the same name must
// match.
type volumeRecord struct {
	Name     string `json:"name"`
	User     string `json:"user"`
	Session  string `json:"session"`
	Capacity int64  `json:"capacity"`
	Keep     bool   `json:"keep,omitempty"`
	TTL      string `json:"ttl,omitempty"`
}

// ID is the volume's id.
func (v *volumeRecord) ID() string { return volumeID(v.User, v.Session) }

// state is the driver's files: <dir>/volumes/USER@ID.json for each
// volume CreateVolume made, <dir>/nodes/NODE/KEY.json for each
// publication on this node (a store on etcd has one state directory
// that every host shares, hence the node).
type state struct {
	volumes string
	pubs    string
}

func openState(dir, node string) (*state, error) {
	s := &state{volumes: filepath.Join(dir, "volumes"), pubs: filepath.Join(dir, "nodes", node)}
	for _, d := range []string{s.volumes, s.pubs} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("csi state: %w", err)
		}
	}
	return s, nil
}

// pubKey names the file of the publication of volumeID at target.
func pubKey(volumeID, target string) string {
	sum := sha256.Sum256([]byte(volumeID + "\x00" + target))
	return hex.EncodeToString(sum[:16]) + ".json"
}

func (s *state) publication(volumeID, target string) (*publication, error) {
	p := &publication{}
	ok, err := readJSON(filepath.Join(s.pubs, pubKey(volumeID, target)), p)
	if err != nil || !ok {
		return nil, err
	}
	return p, nil
}

func (s *state) savePublication(p *publication) error {
	return writeJSON(filepath.Join(s.pubs, pubKey(p.VolumeID, p.Target)), p)
}

func (s *state) dropPublication(volumeID, target string) error {
	return remove(filepath.Join(s.pubs, pubKey(volumeID, target)))
}

// publications lists this node's publications.
func (s *state) publications() ([]publication, error) {
	entries, err := os.ReadDir(s.pubs)
	if err != nil {
		return nil, fmt.Errorf("csi state: %w", err)
	}
	var out []publication
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		var p publication
		ok, err := readJSON(filepath.Join(s.pubs, e.Name()), &p)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, p)
		}
	}
	return out, nil
}

func (s *state) volume(id string) (*volumeRecord, error) {
	if _, _, ok := splitVolumeID(id); !ok {
		return nil, nil
	}
	v := &volumeRecord{}
	ok, err := readJSON(filepath.Join(s.volumes, id+".json"), v)
	if err != nil || !ok {
		return nil, err
	}
	return v, nil
}

func (s *state) saveVolume(v *volumeRecord) error {
	return writeJSON(filepath.Join(s.volumes, v.ID()+".json"), v)
}

func (s *state) dropVolume(id string) error {
	return remove(filepath.Join(s.volumes, id+".json"))
}

// volumeList lists the volumes CreateVolume made, sorted by id.
func (s *state) volumeList() ([]volumeRecord, error) {
	entries, err := os.ReadDir(s.volumes)
	if err != nil {
		return nil, fmt.Errorf("csi state: %w", err)
	}
	var out []volumeRecord
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		v, err := s.volume(id)
		if err != nil {
			return nil, err
		}
		if v != nil {
			out = append(out, *v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out, nil
}

// readJSON reads file into v; ok is false when there is no file.
func readJSON(file string, v any) (ok bool, err error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("csi state: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("csi state %s: %w", file, err)
	}
	return true, nil
}

// writeJSON replaces file with v durably: a temporary file, fsynced,
// renamed over it, and the directory fsynced, so that a crash leaves the
// old record or the new one.
func writeJSON(file string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("csi state: %w", err)
	}
	tmp := file + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("csi state: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("csi state: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("csi state: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("csi state: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("csi state: %w", err)
	}
	return syncDir(filepath.Dir(file))
}

func remove(file string) error {
	if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("csi state: %w", err)
	}
	return syncDir(filepath.Dir(file))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("csi state: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("csi state: %w", err)
	}
	return nil
}
