package pgtest

import "syscall"

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
