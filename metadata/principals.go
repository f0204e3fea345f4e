package metadata

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
)

// ValidPrincipal checks a user or group name with the one rule of
// principal names (shedfs.CheckPrincipal), EINVAL if it is not one: they
// appear in paths, zone labels, metrics and audit records, so they stay
// plain.
func ValidPrincipal(name string) error {
	if shedfs.CheckPrincipal(name) != 0 {
		return fmt.Errorf("principal name %q: %w", name, syscall.EINVAL)
	}
	return nil
}

// deleteBatch is how many keys one cleanup transaction deletes, well below
// badger's transaction size limit.
const deleteBatch = 1000

// newRoot builds a zone root directory (Parent 0).
func newRoot(ino uint64, zone shedfs.Zone, owner string, mode shedfs.OwnMode, now time.Time) *shedfs.Inode {
	return &shedfs.Inode{
		Ino: ino, Mode: syscall.S_IFDIR | 0o755, Nlink: 2,
		Atime: now, Mtime: now, Ctime: now,
		Zone: zone, Owner: owner, OwnMode: mode,
	}
}

func getJSON(tx Txn, key []byte, what string, v any) error {
	b, err := tx.Get(key)
	if errors.Is(err, ErrNotFound) {
		return syscall.ENOENT
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w: %v", what, ErrCorrupt, err)
	}
	return nil
}

func setJSON(tx Txn, key []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Set(key, b)
}

// AddUser creates a user with its private, output and uploads roots
// (directories 0755, owned by uid/gid 0, zone roots have Parent 0).
// EEXIST if it exists, EINVAL for a bad name. Each root counts as one inode
// of the user's usage, as every inode of a zone does.
func (s *Store) AddUser(name string) (*shedfs.User, error) {
	if err := ValidPrincipal(name); err != nil {
		return nil, err
	}
	var inos [3]uint64
	for i := range inos {
		var err error
		if inos[i], err = s.allocIno(); err != nil {
			return nil, err
		}
	}
	var u *shedfs.User
	err := s.update(func(o *op) error {
		if _, err := o.tx.Get(userKey(name)); err == nil {
			return fmt.Errorf("user %s: %w", name, syscall.EEXIST)
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		u = &shedfs.User{Name: name, Roots: shedfs.Roots{Private: inos[0], Output: inos[1], Uploads: inos[2]}, Created: o.now}
		for i, k := range []shedfs.ZoneKind{shedfs.ZonePrivate, shedfs.ZoneOutput, shedfs.ZoneUploads} {
			o.put(newRoot(inos[i], shedfs.Zone{Kind: k, Principal: name}, name, shedfs.OwnModeNone, o.now))
		}
		if err := o.charge(shedfs.UserHolder(name), 0, 3); err != nil {
			return err
		}
		if err := o.applyDefaultLimit(shedfs.UserHolder(name), false); err != nil {
			return err
		}
		return setJSON(o.tx, userKey(name), u)
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// GetUser returns a user, ENOENT if unknown.
func (s *Store) GetUser(name string) (*shedfs.User, error) {
	u := &shedfs.User{}
	err := s.kv.View(func(tx Txn) error {
		return getJSON(tx, userKey(name), "user "+name, u)
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// ListUsers returns every user, sorted by name.
func (s *Store) ListUsers() ([]shedfs.User, error) {
	var out []shedfs.User
	err := s.kv.View(func(tx Txn) error {
		return tx.Scan([]byte{pUser}, nil, func(k, v []byte) error {
			var u shedfs.User
			if err := json.Unmarshal(v, &u); err != nil {
				return fmt.Errorf("decode user %s: %w: %v", k[1:], ErrCorrupt, err)
			}
			out = append(out, u)
			return nil
		})
	})
	return out, err
}

// UpdateUser changes a user's settings (Uid, Gid) in one transaction.
// Changing Name or Roots is EINVAL.
func (s *Store) UpdateUser(name string, fn func(u *shedfs.User) error) (*shedfs.User, error) {
	var out *shedfs.User
	err := s.update(func(o *op) error {
		u := &shedfs.User{}
		if err := getJSON(o.tx, userKey(name), "user "+name, u); err != nil {
			return err
		}
		before := *u
		if err := fn(u); err != nil {
			return err
		}
		if u.Name != before.Name || u.Roots != before.Roots {
			return fmt.Errorf("update user %s: name or roots changed: %w", name, syscall.EINVAL)
		}
		out = u
		return setJSON(o.tx, userKey(name), u)
	})
	return out, err
}

// RemoveUser deletes a user, its share-by-link links and every inode of
// its three zones (their blobs are returned so the caller deletes them
// after commit).
//
// The user record, its group memberships, usage and limit go in one
// transaction first, so the user vanishes atomically; its links and its
// trees are then deleted in batches. A crash in between leaves
// unreachable inodes that Check reclaims, and link records that open
// nothing (Link.UserRoot names the user removed, not one added again
// under the name) until they expire.
func (s *Store) RemoveUser(name string) (blobs []uint64, err error) {
	if err := ValidPrincipal(name); err != nil {
		return nil, err
	}
	var u shedfs.User
	err = s.update(func(o *op) error {
		if err := getJSON(o.tx, userKey(name), "user "+name, &u); err != nil {
			return err
		}
		var groups []shedfs.Group
		if err := o.tx.Scan([]byte{pGroup}, nil, func(k, v []byte) error {
			var g shedfs.Group
			if err := json.Unmarshal(v, &g); err != nil {
				return fmt.Errorf("decode group %s: %w: %v", k[1:], ErrCorrupt, err)
			}
			groups = append(groups, g)
			return nil
		}); err != nil {
			return err
		}
		for _, g := range groups {
			if i := slices.Index(g.Members, name); i >= 0 {
				g.Members = slices.Delete(g.Members, i, i+1)
				if err := setJSON(o.tx, groupKey(g.Name), &g); err != nil {
					return err
				}
			}
		}
		h := shedfs.UserHolder(name)
		for _, k := range [][]byte{userKey(name), usageKey(h), limitKey(h)} {
			if err := o.tx.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Not a user of the name added meanwhile: their links have their root.
	mine := func(l Link) bool { return l.User == name && (l.UserRoot == 0 || l.UserRoot == u.Roots.Private) }
	if _, err := s.DropLinks(mine); err != nil {
		return nil, fmt.Errorf("links of %s: %w", name, err)
	}
	return s.deleteTrees(shedfs.UserHolder(name), u.Roots.Private, u.Roots.Output, u.Roots.Uploads)
}

// deleteTrees removes every inode below the given roots (and the roots),
// plus orphaned inodes of the holder, in batches. It returns the regular
// files, whose blobs the caller deletes.
func (s *Store) deleteTrees(h shedfs.Holder, roots ...uint64) ([]uint64, error) {
	var keys [][]byte
	var blobs []uint64
	err := s.kv.View(func(tx Txn) error {
		seen := map[uint64]bool{}
		queue := []uint64{}
		for _, r := range roots {
			if r != 0 && !seen[r] {
				seen[r] = true
				queue = append(queue, r)
			}
		}
		if err := tx.Scan([]byte{pOrphan}, nil, func(k, _ []byte) error {
			queue = append(queue, keyIno(k))
			return nil
		}); err != nil {
			return err
		}
		collect := func(k, _ []byte) error {
			keys = append(keys, append([]byte(nil), k...))
			return nil
		}
		for len(queue) > 0 {
			ino := queue[0]
			queue = queue[1:]
			n, err := getInode(tx, &s.keys, ino)
			if errors.Is(err, syscall.ENOENT) {
				continue
			}
			if err != nil {
				return err
			}
			if shedfs.HolderOf(n.Zone) != h {
				continue // an orphan of someone else
			}
			seen[ino] = true
			keys = append(keys, s.keys.inode(ino), orphanKey(ino))
			if n.IsRegular() {
				blobs = append(blobs, ino)
			}
			if err := tx.Scan(xattrPrefix(ino), nil, collect); err != nil {
				return err
			}
			if !n.IsDir() {
				continue
			}
			if err := tx.Scan(s.keys.entryPrefix(ino), nil, func(k, v []byte) error {
				keys = append(keys, append([]byte(nil), k...))
				child, _, err := decodeEntry(v)
				if err != nil {
					return err
				}
				if !seen[child] {
					seen[child] = true
					queue = append(queue, child)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("collect zone trees of %s: %w", h, err)
	}
	if err := s.deleteKeys(keys); err != nil {
		return nil, fmt.Errorf("delete zone trees of %s: %w", h, err)
	}
	return blobs, nil
}

// deleteKeys deletes keys in transactions of deleteBatch keys.
func (s *Store) deleteKeys(keys [][]byte) error {
	for len(keys) > 0 {
		n := min(len(keys), deleteBatch)
		batch := keys[:n]
		keys = keys[n:]
		if err := s.kv.Update(func(tx Txn) error {
			for _, k := range batch {
				if err := tx.Delete(k); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// AddGroup creates a group with its zone root. EEXIST, EINVAL as AddUser.
func (s *Store) AddGroup(name string) (*shedfs.Group, error) {
	if err := ValidPrincipal(name); err != nil {
		return nil, err
	}
	ino, err := s.allocIno()
	if err != nil {
		return nil, err
	}
	var g *shedfs.Group
	err = s.update(func(o *op) error {
		if _, err := o.tx.Get(groupKey(name)); err == nil {
			return fmt.Errorf("group %s: %w", name, syscall.EEXIST)
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		g = &shedfs.Group{Name: name, Root: ino, Members: []string{}, Created: o.now}
		o.put(newRoot(ino, shedfs.Zone{Kind: shedfs.ZoneGroup, Principal: name}, "", shedfs.OwnModeGroup, o.now))
		if err := o.charge(shedfs.GroupHolder(name), 0, 1); err != nil {
			return err
		}
		if err := o.applyDefaultLimit(shedfs.GroupHolder(name), true); err != nil {
			return err
		}
		return setJSON(o.tx, groupKey(name), g)
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// GetGroup returns a group, ENOENT if unknown.
func (s *Store) GetGroup(name string) (*shedfs.Group, error) {
	g := &shedfs.Group{}
	err := s.kv.View(func(tx Txn) error {
		return getJSON(tx, groupKey(name), "group "+name, g)
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// ListGroups returns every group, sorted by name.
func (s *Store) ListGroups() ([]shedfs.Group, error) {
	var out []shedfs.Group
	err := s.kv.View(func(tx Txn) error {
		return tx.Scan([]byte{pGroup}, nil, func(k, v []byte) error {
			var g shedfs.Group
			if err := json.Unmarshal(v, &g); err != nil {
				return fmt.Errorf("decode group %s: %w: %v", k[1:], ErrCorrupt, err)
			}
			out = append(out, g)
			return nil
		})
	})
	return out, err
}

// RemoveGroup deletes a group and its zone tree (blobs returned as RemoveUser).
func (s *Store) RemoveGroup(name string) (blobs []uint64, err error) {
	if err := ValidPrincipal(name); err != nil {
		return nil, err
	}
	var g shedfs.Group
	h := shedfs.GroupHolder(name)
	err = s.update(func(o *op) error {
		if err := getJSON(o.tx, groupKey(name), "group "+name, &g); err != nil {
			return err
		}
		for _, k := range [][]byte{groupKey(name), usageKey(h), limitKey(h)} {
			if err := o.tx.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.deleteTrees(h, g.Root)
}

// AddMember adds an existing user to an existing group (ENOENT otherwise;
// adding a member twice is not an error).
func (s *Store) AddMember(group, user string) error {
	return s.update(func(o *op) error {
		var g shedfs.Group
		if err := getJSON(o.tx, groupKey(group), "group "+group, &g); err != nil {
			return err
		}
		if _, err := o.tx.Get(userKey(user)); errors.Is(err, ErrNotFound) {
			return fmt.Errorf("user %s: %w", user, syscall.ENOENT)
		} else if err != nil {
			return err
		}
		if slices.Contains(g.Members, user) {
			return nil
		}
		g.Members = append(g.Members, user)
		sort.Strings(g.Members)
		return setJSON(o.tx, groupKey(group), &g)
	})
}

// RemoveMember removes a user from a group (ENOENT if not a member).
func (s *Store) RemoveMember(group, user string) error {
	return s.update(func(o *op) error {
		var g shedfs.Group
		if err := getJSON(o.tx, groupKey(group), "group "+group, &g); err != nil {
			return err
		}
		i := slices.Index(g.Members, user)
		if i < 0 {
			return fmt.Errorf("%s is not a member of %s: %w", user, group, syscall.ENOENT)
		}
		g.Members = slices.Delete(g.Members, i, i+1)
		return setJSON(o.tx, groupKey(group), &g)
	})
}

// GroupsOf returns the groups a user belongs to, sorted (ENOENT for an
// unknown user).
func (s *Store) GroupsOf(user string) ([]string, error) {
	var out []string
	err := s.kv.View(func(tx Txn) error {
		if _, err := tx.Get(userKey(user)); errors.Is(err, ErrNotFound) {
			return fmt.Errorf("user %s: %w", user, syscall.ENOENT)
		} else if err != nil {
			return err
		}
		return tx.Scan([]byte{pGroup}, nil, func(k, v []byte) error {
			var g shedfs.Group
			if err := json.Unmarshal(v, &g); err != nil {
				return fmt.Errorf("decode group %s: %w: %v", k[1:], ErrCorrupt, err)
			}
			if slices.Contains(g.Members, user) {
				out = append(out, g.Name)
			}
			return nil
		})
	})
	return out, err
}
