package relay

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/relay/internal/sqlitearchive"
	"golang.org/x/sys/unix"
)

// TestCommitterRunsNicer checks that the archive's committer runs on a
// thread CommitterNice steps nicer than the process, and that the thread
// ends with the archive, so no other goroutine ever runs at its priority.
func TestCommitterRunsNicer(t *testing.T) {
	// Threads start at the nice of the thread that made them, and the
	// runtime makes threads from an ordinary one, so the test's own
	// thread shows what the committer's started at. (Not the process's:
	// an earlier archive's committer may have run on the main thread.)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	base := threadNice(t, unix.Gettid())
	if base >= 19 {
		t.Skipf("the test runs at nice %d already", base)
	}
	// Where a sandbox refuses setpriority the committer runs as it is;
	// try it on a thread that ends with its goroutine.
	refused := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread ends here
		refused <- unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), base+1)
	}()
	if err := <-refused; err != nil {
		t.Skipf("setpriority on a thread is refused here: %v", err)
	}
	tr := startRelay(t, Config{DBPath: filepath.Join(t.TempDir(), "relay.db"), NoSync: true})
	a := tr.arch.(*sqlitearchive.Archive)
	var tid int
	waitfor.True(t, 5*time.Second, func() bool { tid = a.CommitterThread(); return tid != 0 }, "the committer did not lower its thread's priority")
	if tid == unix.Gettid() {
		t.Fatal("the committer runs on the test's thread")
	}
	if got, want := threadNice(t, tid), min(base+sqlitearchive.CommitterNice, 19); got != want {
		t.Fatalf("committer thread %d runs at nice %d, want %d (others at %d)", tid, got, want, base)
	}
	// The archive still works from that thread.
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	if seq := c.publishAck(chA, []byte("hello")); seq != 1 {
		t.Fatalf("publish acked as seq %d", seq)
	}
	c.c.CloseNow()
	tr.stop(t)
	if tid == os.Getpid() {
		// The runtime never ends the main thread; it parks it for good
		// instead, so it runs nothing else either.
		return
	}
	waitfor.True(t, 5*time.Second, func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid))
		return errors.Is(err, os.ErrNotExist)
	}, "committer thread %d still runs after the relay stopped", tid)
}

// threadNice reads a thread's nice value from /proc (field 19 of stat).
func threadNice(t *testing.T, tid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", tid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	n, err := strconv.Atoi(f[19-3])
	if err != nil {
		t.Fatalf("stat of thread %d: %q", tid, b)
	}
	return n
}
