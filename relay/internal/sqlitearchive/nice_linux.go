package sqlitearchive

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// lowerPriority locks the calling goroutine to its thread and makes that
// thread n steps nicer than it is (at most 19), so that under contention
// for the CPU the kernel runs the process's other threads first. It
// returns the thread's id, or 0 (and leaves the goroutine unlocked) when
// the priority cannot be changed. The thread ends with the goroutine: a
// goroutine that exits locked takes its thread with it, so the nicer
// thread never runs anything else.
//
// On Linux setpriority(PRIO_PROCESS, tid) applies to the one thread.
// (The runtime may put the goroutine on the main thread, whose nice is
// what ps and top show for the whole process.)
func lowerPriority(n int) int {
	runtime.LockOSThread()
	tid := unix.Gettid()
	// The raw getpriority system call reports 20 - nice.
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err == nil {
		err = unix.Setpriority(unix.PRIO_PROCESS, tid, min(20-prio+n, 19))
	}
	if err != nil {
		runtime.UnlockOSThread()
		return 0
	}
	return tid
}
