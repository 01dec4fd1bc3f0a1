//go:build !unix

package datadir

// RestrictUmask does nothing on systems without a umask; [Secure] still
// sets the modes of the files it finds.
func RestrictUmask() (restore func()) { return func() {} }
