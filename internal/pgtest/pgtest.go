// Package pgtest runs throw-away PostgreSQL servers for tests: [Start]
// makes a cluster with initdb in a temporary directory and runs postgres
// on a Unix socket there, as an unprivileged user when the caller is root
// (PostgreSQL refuses to run as root); [Connect] uses a server someone
// else runs instead. Each test then takes a fresh schema of it with
// [Server.NewSchema].
//
// The package only starts and stops processes; whether a test without
// PostgreSQL binaries skips or fails is the test's decision.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// ErrUnavailable is returned by [Start] when no PostgreSQL server
// binaries (initdb and postgres) are installed.
var ErrUnavailable = errors.New("pgtest: no PostgreSQL server binaries (initdb, postgres) found in PATH or /usr/lib/postgresql/*/bin")

// Options configures [Start]. The zero value is a cluster tuned for
// tests.
type Options struct {
	// Durable keeps fsync and synchronous commits on, as in production;
	// by default they are off, which makes commits far cheaper and loses
	// nothing a test needs (a crash of the machine loses the cluster's
	// directory anyway).
	Durable bool
}

// Server is a PostgreSQL server for tests.
type Server struct {
	url   string  // the admin database, postgres://
	admin *sql.DB // on url

	// For a cluster Start made; nil and "" for one Connect found.
	cmd  *exec.Cmd
	dir  string
	done chan struct{} // closed when cmd has exited

	mu      sync.Mutex
	schemas []string // the schemas NewSchema made, dropped by Close of a Connect server
	n       atomic.Int64
}

// BinDir returns the directory holding initdb and postgres, or
// ErrUnavailable.
func BinDir() (string, error) {
	var dirs []string
	for _, name := range []string{"postgres", "initdb"} {
		if p, err := exec.LookPath(name); err == nil {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				dirs = append(dirs, filepath.Dir(r))
			}
			dirs = append(dirs, filepath.Dir(p))
		}
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(versions, func(i, j int) bool { return pgVersion(versions[i]) > pgVersion(versions[j]) })
	dirs = append(dirs, versions...)
	dirs = append(dirs, "/usr/local/pgsql/bin")
	for _, d := range dirs {
		if executable(filepath.Join(d, "initdb")) && executable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", ErrUnavailable
}

func pgVersion(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Start initialises a cluster in a new temporary directory and starts a
// postgres serving it on a Unix socket in that directory only (no TCP).
// Close stops it and removes the directory.
func Start(opts Options) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	// As root, the server runs as another user, who must be able to
	// reach the directory: /tmp is open to everyone, a private TMPDIR
	// may not be.
	parent := ""
	if os.Geteuid() == 0 {
		if fi, err := os.Stat("/tmp"); err == nil && fi.IsDir() {
			parent = "/tmp"
		}
	}
	dir, err := os.MkdirTemp(parent, "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	attr, owner, err := unprivileged(dir)
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	if owner != nil {
		if err := os.Chown(logf.Name(), owner[0], owner[1]); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "skytale", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
	initdb.Dir = dir
	initdb.Stdout, initdb.Stderr = logf, logf
	initdb.SysProcAttr = attr
	if err := initdb.Run(); err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %v (log in %s)", err, logf.Name())
	}
	args := []string{"-D", data, "-k", dir, "-p", "5432",
		"-c", "listen_addresses=", "-c", "max_connections=200", "-c", "shared_buffers=32MB"}
	if !opts.Durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), args...)
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = withParentDeath(attr)
	// The kernel sends the parent-death signal when the thread that
	// started the child ends, not the process (prctl(2)), and a Go thread
	// ends whenever a goroutine locked to it does (a relay's committer,
	// say), which may well be the thread that started postgres. So postgres
	// is started from a goroutine locked to a thread of its own, which
	// lives until postgres has exited.
	started := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		if err := s.cmd.Start(); err != nil {
			runtime.UnlockOSThread()
			started <- err
			return
		}
		started <- nil
		s.cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		s.cmd = nil
		return nil, fmt.Errorf("pgtest: start postgres: %v", err)
	}
	s.done = done
	s.url = "postgres://skytale@/postgres?host=" + url.QueryEscape(dir) + "&port=5432&sslmode=disable"
	if err := s.waitReady(30 * time.Second); err != nil {
		return nil, fmt.Errorf("%v (log in %s)", err, logf.Name())
	}
	ok = true
	return s, nil
}

// Connect uses the PostgreSQL server at rawURL, which must let its user
// create schemas in its database. Close drops the schemas NewSchema made
// and leaves the server running.
func Connect(rawURL string) (*Server, error) {
	s := &Server{url: rawURL}
	if err := s.waitReady(10 * time.Second); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) waitReady(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	db, err := sql.Open("pgx", s.url)
	if err != nil {
		return fmt.Errorf("pgtest: %v", err)
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			s.admin = db
			return nil
		}
		if s.done != nil {
			select {
			case <-s.done:
				db.Close()
				return errors.New("pgtest: postgres exited during start-up")
			default:
			}
		}
		if time.Now().After(deadline) {
			db.Close()
			return fmt.Errorf("pgtest: server not ready after %v: %v", wait, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// URL is the server's admin database.
func (s *Server) URL() string { return s.url }

// NewSchema creates an empty schema and returns a URL of the server whose
// connections work in it (search_path set to it alone).
func (s *Server) NewSchema(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.n.Add(1))
	if _, err := s.admin.ExecContext(ctx, "CREATE SCHEMA "+name); err != nil {
		return "", fmt.Errorf("pgtest: create schema: %v", err)
	}
	s.mu.Lock()
	s.schemas = append(s.schemas, name)
	s.mu.Unlock()
	return WithSearchPath(s.url, name)
}

// WithSearchPath returns rawURL with its search_path set to schema.
func WithSearchPath(rawURL, schema string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", errors.New("pgtest: the URL does not parse")
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Pause stops every process of a server Start started (SIGSTOP), as a
// machine or network that stops answering: connections stay open and
// nothing answers on them. Resume continues it.
func (s *Server) Pause() error {
	if s.cmd == nil {
		return errors.New("pgtest: only a server Start started can be paused")
	}
	return signalGroup(s.cmd.Process.Pid, syscall.SIGSTOP)
}

// Resume continues a server Pause stopped.
func (s *Server) Resume() error {
	if s.cmd == nil {
		return errors.New("pgtest: only a server Start started can be resumed")
	}
	return signalGroup(s.cmd.Process.Pid, syscall.SIGCONT)
}

// Close stops a server Start started (fast shutdown, then kill if it
// lingers) and removes its directory; for a Connect server it drops the
// schemas NewSchema made.
func (s *Server) Close() error {
	if s.cmd == nil && s.admin != nil {
		s.mu.Lock()
		for _, name := range s.schemas {
			s.admin.Exec("DROP SCHEMA IF EXISTS " + name + " CASCADE")
		}
		s.schemas = nil
		s.mu.Unlock()
	}
	if s.admin != nil {
		s.admin.Close()
	}
	var err error
	if s.cmd != nil {
		s.Resume() // a paused server cannot shut down
		s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(15 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
			err = errors.New("pgtest: postgres did not stop in 15 s and was killed")
		}
	}
	if s.dir != "" {
		if rerr := os.RemoveAll(s.dir); err == nil {
			err = rerr
		}
	}
	return err
}

// unprivileged returns the process attributes that run initdb and
// postgres as an unprivileged user when this process is root (nil
// otherwise) with that user's uid and gid, and hands dir to the user.
func unprivileged(dir string) (*syscall.SysProcAttr, []int, error) {
	if os.Geteuid() != 0 {
		return nil, nil, nil
	}
	var u *user.User
	var err error
	for _, name := range []string{"postgres", "nobody"} {
		if u, err = user.Lookup(name); err == nil {
			break
		}
	}
	if err != nil {
		return nil, nil, errors.New("pgtest: running as root, and there is no postgres or nobody user to run PostgreSQL as")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, nil, err
	}
	attr, err := asUser(uint32(uid), uint32(gid))
	return attr, []int{uid, gid}, err
}
