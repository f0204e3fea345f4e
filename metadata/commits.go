package metadata

// Commits is how many read-write transactions of the schema (inodes,
// entries, usage, content records, the audit trail's batches) this store
// has committed since it was opened; the inode-number leases and the
// record of the last check are not among them. A commit is the unit a
// small-file workload pays for (docs/performance.md, "One commit per file"), so the daemon
// exports it as a metric and tests count what one file costs with it.
func (s *Store) Commits() uint64 {
	return s.commits.Load()
}
