// Package shedfs holds the plain types and rules of the shedfs domain that
// every layer shares: zones and ownership modes, inode records, quota
// holders, usage and limits, what a byte or an xattr is charged, and the
// rules for entry and principal names.
//
// It is a leaf package on purpose (it imports only the standard library),
// so that the pure policy packages zones and acl link nothing heavy, and so
// that each of these rules and formats exists in exactly one place. Package
// metadata stores these types; it re-exports them under their old names.
package shedfs
