// Command cluster runs a Skytale relay cluster on one machine: an embedded
// nats-server with JetStream, three relay nodes sharing its stream, and a
// directory they all follow for members and revocations. A client may use
// any relay node: a publish taken by one is delivered by all three, seqs
// and commit fences are the cluster's, and a client whose node goes away
// reconnects to another and catches up from the last seq it has.
//
//	go run ./examples/cluster [-data DIR] [-nodes 3]
//
// It prints the URLs and runs until interrupted. In production the NATS
// servers run on their own (three of them, with the stream at three
// replicas) and each relay is its own process; see docs/CLUSTER.md.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/skytale-oss/skytale/directory"
	"github.com/skytale-oss/skytale/directory/pgstore"
	"github.com/skytale-oss/skytale/relay"
	"github.com/skytale-oss/skytale/relay/jsarchive"
)

func main() {
	data := flag.String("data", "", "directory of the JetStream store (default: a temporary one, removed on exit)")
	nodes := flag.Int("nodes", 3, "relay nodes")
	dirDB := flag.String("directory-db", "", "the directory's database: a postgres:// URL, or a SQLite file (default: in memory)")
	flag.Parse()
	if *data == "" {
		dir, err := os.MkdirTemp("", "skytale-cluster-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(dir)
		*data = dir
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c, err := start(*data, *nodes, *dirDB)
	if err != nil {
		log.Fatal(err)
	}
	c.print(os.Stdout)
	<-ctx.Done()
	c.close()
}

// cluster is what start runs: NATS, the directory and the relay nodes,
// each on its own loopback port.
type cluster struct {
	nats      *natsserver.Server
	NATSURL   string
	dir       *directory.Server
	DirURL    string
	relays    []*relay.Server
	RelayURLs []string
	servers   []*http.Server
}

// start starts the cluster with JetStream's store in dataDir and the
// directory on dirDB (directory.Config.Database, on pgstore for a
// PostgreSQL URL; "" keeps it in memory).
func start(dataDir string, nodes int, dirDB string) (*cluster, error) {
	c := &cluster{}
	ns, err := natsserver.NewServer(&natsserver.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  dataDir,
		// A relay payload is up to 1 MiB; NATS's default max_payload
		// is 1 MB.
		MaxPayload: 2 << 20,
		// Acknowledged means on disk.
		SyncAlways: true,
		NoSigs:     true,
		NoLog:      true,
	})
	if err != nil {
		return nil, err
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("nats-server did not start")
	}
	c.nats, c.NATSURL = ns, ns.ClientURL()

	secret := make([]byte, 32)
	rand.Read(secret)
	fence := &relayFence{}
	dcfg := directory.Config{JWTSecret: secret, OpenSignup: true, Database: dirDB, Fence: fence}
	if strings.HasPrefix(dirDB, "postgres://") || strings.HasPrefix(dirDB, "postgresql://") {
		dcfg.Backend = pgstore.Backend{}
	}
	c.dir, err = directory.New(context.Background(), dcfg)
	if err != nil {
		c.close()
		return nil, err
	}
	if c.DirURL, err = c.serve(c.dir); err != nil {
		c.close()
		return nil, err
	}
	for range nodes {
		r, err := relay.New(context.Background(), relay.Config{
			JWTSecret:   secret,
			Archive:     jsarchive.New(jsarchive.Config{URL: c.NATSURL}),
			Members:     c.dir,
			Revocations: c.dir,
		})
		if err != nil {
			c.close()
			return nil, err
		}
		c.relays = append(c.relays, r)
		fence.r.CompareAndSwap(nil, r)
		u, err := c.serve(r)
		if err != nil {
			c.close()
			return nil, err
		}
		c.RelayURLs = append(c.RelayURLs, u)
	}
	return c, nil
}

// relayFence is where the directory reads a channel's commit fence (it
// keeps a GroupInfo only for the epoch the relays have reached): the first
// relay node, since the fence lives in the JetStream stream and every node
// reads the same. The directory starts first, as the relays follow its
// feeds, so the node is set once it runs.
type relayFence struct{ r atomic.Pointer[relay.Server] }

func (f *relayFence) NextEpoch(ctx context.Context, channel string) (uint64, bool, error) {
	r := f.r.Load()
	if r == nil {
		return 0, false, errors.New("cluster: no relay node runs yet")
	}
	return r.NextEpoch(ctx, channel)
}

// serve serves h on a free loopback port and returns its URL.
func (c *cluster) serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	c.servers = append(c.servers, srv)
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), nil
}

func (c *cluster) print(w io.Writer) {
	fmt.Fprintf(w, "nats:      %s\n", c.NATSURL)
	fmt.Fprintf(w, "directory: %s\n", c.DirURL)
	for i, u := range c.RelayURLs {
		fmt.Fprintf(w, "relay %d:   %s\n", i+1, u)
	}
}

// close stops the relays (they answer what they took), the directory and
// NATS, in that order.
func (c *cluster) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range c.servers {
		s.Shutdown(ctx)
	}
	for _, r := range c.relays {
		r.Close(ctx)
	}
	if c.dir != nil {
		c.dir.Close(ctx)
	}
	if c.nats != nil {
		c.nats.Shutdown()
		c.nats.WaitForShutdown()
	}
}
