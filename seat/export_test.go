package seat

// SetTestOnlyBeforeCommit installs f to run just before each of this
// package's commits is published; it returns a function that puts back
// what was there before.
func SetTestOnlyBeforeCommit(f func()) (restore func()) {
	prev := testOnlyBeforeCommit
	testOnlyBeforeCommit = f
	return func() { testOnlyBeforeCommit = prev }
}

// SetTestOnlyAfterCommit installs f to run after the relay accepted a
// commit and before the seat confirms it.
func SetTestOnlyAfterCommit(f func() error) (restore func()) {
	prev := testOnlyAfterCommit
	testOnlyAfterCommit = f
	return func() { testOnlyAfterCommit = prev }
}
