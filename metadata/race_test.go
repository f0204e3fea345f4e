//go:build race

package metadata

// raceEnabled reports that the tests run under the race detector.
const raceEnabled = true
