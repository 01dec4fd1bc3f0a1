//go:build benchnoflush

package cli

// benchNoFlush: built with -tags benchnoflush, tally serve's relay archive
// never fsyncs (relay.Config.NoSync). It is the floor of the relay's ack
// and delivery paths with the archive's flushes taken out, which
// relaybench measures beside a normal build (sidebyside.sh NOFLUSH=1,
// docs/BENCHMARKS.md). Never a build to keep data with: an ack then
// survives no crash of the machine.
const benchNoFlush = true
