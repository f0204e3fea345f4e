package csi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/daemon"
)

// Volume attributes (a PersistentVolume's volumeAttributes, an inline
// volume's volumeAttributes) and StorageClass parameters this driver reads.
const (
	AttrUser         = "user"
	AttrSession      = "session"
	AttrNewSession   = "newSession"
	AttrSessionTTL   = "sessionTTL"
	AttrSessionQuota = "sessionQuota"
	AttrSessionInode = "sessionInodes"
	AttrOnUnpublish  = "onUnpublish"
	AttrReadOnly     = "readOnly"

	ParamUser     = "user"
	ParamTTL      = "ttl"
	ParamOnDelete = "onDelete"

	// kubePrefix is the prefix of the keys kubelet and the
	// external-provisioner add on their own (pod name, ephemeral, PVC
	// name): they are not ours to refuse.
	kubePrefix = "csi.storage.k8s.io/"
)

// volumeAttrs is what NodePublishVolume mounts, read from the volume's
// attributes (and, for a volume this controller made, from its id).
type volumeAttrs struct {
	User string
	// Session is an open session whose view is published; "" with
	// NewSession or for the user's main view.
	Session string
	// NewSession opens a session for this publication, closed at
	// unpublish (to the trash, or kept with Keep).
	NewSession bool
	TTL        string
	Quota      daemon.Amount
	Keep       bool
	ReadOnly   bool
}

// attrError is a bad attribute or parameter: InvalidArgument.
type attrError struct{ msg string }

func (e *attrError) Error() string { return e.msg }

func badAttr(format string, args ...any) error {
	return &attrError{msg: fmt.Sprintf(format, args...)}
}

// parseVolumeAttrs reads a volume's attributes. volumeID supplies user
// and session when the attributes name neither and the id is USER@ID (a
// volume CreateVolume made, or a static PV whose handle names a session).
// Unknown keys are refused, so that a typo is not a silent default.
func parseVolumeAttrs(volumeID string, attrs map[string]string) (*volumeAttrs, error) {
	a := &volumeAttrs{}
	for k, v := range attrs {
		switch k {
		case AttrUser:
			a.User = v
		case AttrSession:
			a.Session = v
		case AttrNewSession:
			b, err := parseBool(k, v)
			if err != nil {
				return nil, err
			}
			a.NewSession = b
		case AttrSessionTTL:
			if d, err := time.ParseDuration(v); err != nil || d <= 0 {
				return nil, badAttr("%s %q: give a positive duration (90s, 2h)", k, v)
			}
			a.TTL = v
		case AttrSessionQuota:
			n, err := daemon.ParseSize(v)
			if err != nil {
				return nil, badAttr("%s: %v", k, err)
			}
			a.Quota.Bytes = n
		case AttrSessionInode:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, badAttr("%s %q: give a number of inodes", k, v)
			}
			a.Quota.Inodes = n
		case AttrOnUnpublish:
			keep, err := parseKeep(k, v)
			if err != nil {
				return nil, err
			}
			a.Keep = keep
		case AttrReadOnly:
			b, err := parseBool(k, v)
			if err != nil {
				return nil, err
			}
			a.ReadOnly = b
		default:
			if !strings.HasPrefix(k, kubePrefix) {
				return nil, badAttr("unknown volume attribute %q (known: user, session, newSession, sessionTTL, sessionQuota, sessionInodes, onUnpublish, readOnly)", k)
			}
		}
	}
	if a.User == "" && a.Session == "" {
		if user, id, ok := splitVolumeID(volumeID); ok {
			a.User, a.Session = user, id
		}
	}
	if a.User == "" {
		return nil, badAttr("volume attribute %q is required", AttrUser)
	}
	if shedfs.CheckPrincipal(a.User) != 0 {
		return nil, badAttr("%s %q: not a user name", AttrUser, a.User)
	}
	if a.Session != "" && shedfs.CheckPrincipal(a.Session) != 0 {
		return nil, badAttr("%s %q: not a session id", AttrSession, a.Session)
	}
	if a.Session != "" && a.NewSession {
		return nil, badAttr("%s and %s=true exclude each other: publish an open session or open a new one", AttrSession, AttrNewSession)
	}
	if !a.NewSession && (a.TTL != "" || a.Quota != (daemon.Amount{}) || a.Keep) {
		return nil, badAttr("%s, %s, %s and %s apply only with %s=true", AttrSessionTTL, AttrSessionQuota, AttrSessionInode, AttrOnUnpublish, AttrNewSession)
	}
	return a, nil
}

// createParams is what CreateVolume reads from a StorageClass's
// parameters.
type createParams struct {
	User string
	TTL  string
	Keep bool
}

// parseCreateParams reads CreateVolume's parameters; unknown keys are
// refused.
func parseCreateParams(params map[string]string) (*createParams, error) {
	p := &createParams{}
	for k, v := range params {
		switch k {
		case ParamUser:
			p.User = v
		case ParamTTL:
			if d, err := time.ParseDuration(v); err != nil || d <= 0 {
				return nil, badAttr("parameter %s %q: give a positive duration (90s, 2h)", k, v)
			}
			p.TTL = v
		case ParamOnDelete:
			keep, err := parseKeep(k, v)
			if err != nil {
				return nil, err
			}
			p.Keep = keep
		default:
			if !strings.HasPrefix(k, kubePrefix) {
				return nil, badAttr("unknown parameter %q (known: user, ttl, onDelete)", k)
			}
		}
	}
	if p.User == "" {
		return nil, badAttr("parameter %q is required", ParamUser)
	}
	if shedfs.CheckPrincipal(p.User) != 0 {
		return nil, badAttr("parameter %s %q: not a user name", ParamUser, p.User)
	}
	return p, nil
}

func parseBool(k, v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badAttr("%s %q: give true or false", k, v)
	}
	return b, nil
}

// parseKeep reads where a closed session goes: "trash" (the default) or
// "keep" (home/sessions/ID).
func parseKeep(k, v string) (bool, error) {
	switch v {
	case "", "trash":
		return false, nil
	case "keep":
		return true, nil
	}
	return false, badAttr("%s %q: give trash or keep", k, v)
}

// volumeID names session id of user: USER@ID, which no user name is.
func volumeID(user, id string) string { return user + "@" + id }

// splitVolumeID reads USER@ID; ok is false for anything else.
func splitVolumeID(vol string) (user, id string, ok bool) {
	user, id, ok = strings.Cut(vol, "@")
	if !ok || shedfs.CheckPrincipal(user) != 0 || shedfs.CheckPrincipal(id) != 0 {
		return "", "", false
	}
	return user, id, true
}

// sessionIDFor is the session id of a volume CreateVolume makes for name:
// the name itself when it is a valid id (a PVC's pvc-UUID is), otherwise
// a digest of it, so that a retry of the same name finds the same
// session.
func sessionIDFor(name string) string {
	if shedfs.CheckPrincipal(name) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "vol-" + hex.EncodeToString(sum[:10])
}

// publishSessionID is the id of the session a newSession publication
// opens: fixed by the volume and the target, so that kubelet's retry of
// a publish that failed half-way (or that a restart interrupted) finds
// the session it opened instead of opening another.
func publishSessionID(volumeID, target string) string {
	sum := sha256.Sum256([]byte(volumeID + "\x00" + target))
	return "csi-" + hex.EncodeToString(sum[:8])
}
