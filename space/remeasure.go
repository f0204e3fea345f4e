package space

// Remeasure makes the next admission measure the disk afresh: the caller
// has just freed space on it (the trash evicted for room).
func (g *Guard) Remeasure() {
	g.mu.Lock()
	g.at = g.at.AddDate(-1, 0, 0)
	g.mu.Unlock()
}
