package cli

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/relay/jsarchive"
)

// clusterCommand holds the operations on a relay cluster's shared state,
// which no node changes by being started with other flags.
func clusterCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "cluster",
		Usage: "change a relay cluster's shared JetStream stream",
		Subcommands: []*ucli.Command{{
			Name:  "update-stream",
			Usage: "set the replica count of the relays' stream",
			Description: "The replica count is the cluster's: the first relay creates the stream with its\n" +
				"--relay-nats-replicas, later relays bind to it and refuse to start when theirs differs.\n" +
				"This is the one way to change it; start the nodes afterwards with the new count or none.",
			Flags: []ucli.Flag{
				&ucli.StringFlag{Name: "relay-nats", Required: true, Usage: "the NATS URLs of the cluster (comma-separated)"},
				&ucli.StringFlag{Name: "relay-nats-stream", Value: jsarchive.DefaultStream, Usage: "the stream name"},
				&ucli.IntFlag{Name: "replicas", Required: true, Usage: "the new replica count, 1 to 5", DefaultText: "none, required"},
			},
			Action: func(c *ucli.Context) error {
				stream, n := c.String("relay-nats-stream"), c.Int("replicas")
				if err := jsarchive.UpdateStreamReplicas(c.Context, c.String("relay-nats"), stream, n); err != nil {
					return err
				}
				showf(c.App.Writer, "stream %s now has %d replicas\n", stream, n)
				return nil
			},
		}},
	}
}
