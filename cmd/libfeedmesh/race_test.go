//go:build race

package main

// raceEnabled: the test binary runs under the race detector.
// ThreadSanitizer cannot start inside a library Python loads, so
// TestPython leaves the Python suite to the plain run.
const raceEnabled = true
