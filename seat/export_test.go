package seat

// SetTestOnlyBeforeCommit installs f to run just before each of this
// package's commits is published; it returns a function that puts back
// what was there before.
func SetTestOnlyBeforeCommit(f func()) (restore func()) {
	prev := testOnlyBeforeCommit
	testOnlyBeforeCommit = f
	return func() { testOnlyBeforeCommit = prev }
}
