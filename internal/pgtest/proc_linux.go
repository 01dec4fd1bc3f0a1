package pgtest

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

func asUser(uid, gid uint32) (*syscall.SysProcAttr, error) {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}, nil
}

// withParentDeath makes the kernel kill postgres if this process dies
// first, so a test binary that crashes leaves no server behind.
func withParentDeath(attr *syscall.SysProcAttr) *syscall.SysProcAttr {
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Pdeathsig = syscall.SIGKILL
	return attr
}

// signalGroup sends sig to the postmaster pid and to each of its
// children (the backends and helpers, each in a session of its own, so
// no process group holds them all), the postmaster first, so it forks
// none after the walk.
func signalGroup(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(pid, sig); err != nil {
		return err
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, p := range procs {
		child, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + p.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			syscall.Kill(child, sig)
		}
	}
	return nil
}
