package metadata

import "github.com/shedfs/shedfs"

// The types the store keeps are those of the leaf package shedfs, shared
// with the pure policy packages; these names keep the store's callers
// speaking of metadata.Inode, metadata.Zone and so on.
type (
	// ZoneKind is shedfs.ZoneKind.
	ZoneKind = shedfs.ZoneKind
	// Zone is shedfs.Zone.
	Zone = shedfs.Zone
	// OwnMode is shedfs.OwnMode.
	OwnMode = shedfs.OwnMode
	// Inode is shedfs.Inode.
	Inode = shedfs.Inode
	// DirEntry is shedfs.DirEntry.
	DirEntry = shedfs.DirEntry
	// Roots is shedfs.Roots.
	Roots = shedfs.Roots
	// User is shedfs.User.
	User = shedfs.User
	// Group is shedfs.Group.
	Group = shedfs.Group
	// Holder is shedfs.Holder.
	Holder = shedfs.Holder
	// Usage is shedfs.Usage.
	Usage = shedfs.Usage
	// Limit is shedfs.Limit.
	Limit = shedfs.Limit
)

// The zone kinds and ownership modes of package shedfs.
const (
	ZoneNone    = shedfs.ZoneNone
	ZonePrivate = shedfs.ZonePrivate
	ZoneOutput  = shedfs.ZoneOutput
	ZoneUploads = shedfs.ZoneUploads
	ZoneShare   = shedfs.ZoneShare
	ZoneGroup   = shedfs.ZoneGroup

	OwnModeNone    = shedfs.OwnModeNone
	OwnModeOwner   = shedfs.OwnModeOwner
	OwnModeGroup   = shedfs.OwnModeGroup
	OwnModeOwnerRO = shedfs.OwnModeOwnerRO

	// ChargeUnit is shedfs.ChargeUnit.
	ChargeUnit = shedfs.ChargeUnit
)

// Functions of package shedfs the store's callers use under these names.
var (
	// ParseZone is shedfs.ParseZone.
	ParseZone = shedfs.ParseZone
	// ParseOwnMode is shedfs.ParseOwnMode.
	ParseOwnMode = shedfs.ParseOwnMode
	// HolderOf is shedfs.HolderOf.
	HolderOf = shedfs.HolderOf
	// Charge is shedfs.Charge.
	Charge = shedfs.Charge
	// XattrCost is shedfs.XattrCost.
	XattrCost = shedfs.XattrCost
)
