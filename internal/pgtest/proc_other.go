//go:build !linux

package pgtest

import (
	"errors"
	"syscall"
)

func asUser(uid, gid uint32) (*syscall.SysProcAttr, error) {
	return nil, errors.New("pgtest: running PostgreSQL as another user is supported on Linux only")
}

func withParentDeath(attr *syscall.SysProcAttr) *syscall.SysProcAttr { return attr }

func signalGroup(int, syscall.Signal) error {
	return errors.New("pgtest: pausing PostgreSQL is supported on Linux only")
}
