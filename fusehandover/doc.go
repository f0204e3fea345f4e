// Package fusehandover moves a live FUSE connection served by go-fuse from
// one process to another without unmounting it: the kernel keeps the
// mount, its caches, the node IDs and file handles it was given, and the
// processes using the mount only see their requests wait for the moment
// the connection has no reader.
//
// go-fuse v2.12 can serve only a connection it mounted itself: a Server
// reads INIT first, which the kernel sends once per connection. Adopt
// builds a Server on a descriptor that first carries a synthetic INIT
// (the kernel's own settings, recorded by the old process) and then
// becomes a clone of the connection's device. Stop makes the old Server's
// readers leave the device. Ledger records what the kernel holds (node
// lookups and open handles), so that the new process re-registers the
// same node IDs and file handle numbers through the public
// fuse.RawFileSystem API.
package fusehandover
