package relay

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// idleBufSize is the pooled buffer a read fills: what the upgrade's
// reader held, so a busy socket reads as many bytes per system call as
// before.
const idleBufSize = 4 << 10

var idleBufs = sync.Pool{New: func() any { b := make([]byte, idleBufSize); return &b }}

// idleReader reads a TCP socket, holding a pooled buffer only while it
// has bytes the caller has not taken. It is used by one goroutine at a
// time (the socket's reader).
//
// A read takes a buffer and reads without waiting; when the socket is
// empty it gives the buffer back and lets the runtime's poller wait for
// the socket, holding nothing, then takes a buffer again and reads. That
// is a blocking read of net.Conn's system calls (one read when bytes are
// waiting; a read that finds none, the wait, and the read), and the wait
// is in the same RawConn.Read as the read that found the socket empty, as
// the poller needs: a second RawConn.Read would clear the readiness that
// bytes arriving in between set, and wait for bytes that came already.
type idleReader struct {
	rc   syscall.RawConn
	buf  *[]byte // the bytes read and not yet taken, buf[r:w]; nil when none
	r, w int

	// One read's arguments and results, for readFD, which is made once
	// (a closure per read would allocate its captured variables).
	p      []byte
	direct bool
	got    *[]byte
	n      int
	serr   error
	readFD func(fd uintptr) bool
}

func newIdleReader(tc *net.TCPConn) (*idleReader, error) {
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil, err
	}
	ir := &idleReader{rc: rc}
	ir.readFD = ir.readOnce
	return ir, nil
}

// readOnce is RawConn.Read's function: it reads into ir.p, or into a
// pooled buffer (ir.got) unless ir.direct, and when the socket is empty
// gives the buffer back and returns false, for the poller to wait.
func (ir *idleReader) readOnce(fd uintptr) bool {
	dst := ir.p
	if !ir.direct {
		ir.got = idleBufs.Get().(*[]byte)
		dst = *ir.got
	}
	for {
		ir.n, ir.serr = unix.Read(int(fd), dst)
		if ir.serr != unix.EINTR {
			break
		}
	}
	if ir.serr == unix.EAGAIN {
		if ir.got != nil {
			idleBufs.Put(ir.got)
			ir.got = nil
		}
		return false // empty: the poller waits, and this runs again
	}
	return true
}

// stash keeps b (at most idleBufSize bytes) as the first bytes to read.
func (ir *idleReader) stash(b []byte) {
	buf := idleBufs.Get().(*[]byte)
	ir.buf, ir.r, ir.w = buf, 0, copy(*buf, b)
}

func (ir *idleReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if ir.buf == nil {
		// A read as large as the pooled buffer goes straight into p.
		ir.p, ir.direct, ir.got = p, len(p) >= idleBufSize, nil
		err := ir.rc.Read(ir.readFD)
		direct, buf, n, serr := ir.direct, ir.got, ir.n, ir.serr
		ir.p, ir.got, ir.serr = nil, nil, nil
		switch {
		case err != nil:
			// Closed, or past the read deadline: the buffer went back
			// before the wait.
			return 0, err
		case serr != nil:
			n = 0 // read(2) says -1
			err = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", serr)}
		case n == 0:
			err = io.EOF
		}
		if direct || err != nil {
			if buf != nil {
				idleBufs.Put(buf)
			}
			return n, err
		}
		ir.buf, ir.r, ir.w = buf, 0, n
	}
	n := copy(p, (*ir.buf)[ir.r:ir.w])
	ir.r += n
	if ir.r == ir.w {
		idleBufs.Put(ir.buf)
		ir.buf = nil
	}
	return n, nil
}
