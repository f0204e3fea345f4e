package metadata

// Commits is how many namespace transactions (inodes, entries, usage,
// content records) this store has committed since it was opened; the
// audit trail's batches and the inode-number leases are not among them.
// A commit is the unit a small-file workload pays for (docs/design.md
// section 8), so the daemon exports it as a metric and tests count what
// one file costs with it.
func (s *Store) Commits() uint64 {
	return s.commits.Load()
}
