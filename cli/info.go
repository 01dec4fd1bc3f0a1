package cli

import (
	"io"
	"runtime/debug"
	"slices"

	ucli "github.com/urfave/cli/v2"
)

// buildInfo describes the running binary: the module version, the commit
// it was built from and the Go version.
type buildInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go"`
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: Version}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.GoVersion = bi.GoVersion
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		b.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

func versionString() string {
	b := readBuildInfo()
	s := b.Version
	if b.Commit != "" {
		c := b.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += " (commit " + c
		if b.Modified {
			s += ", modified"
		}
		s += ")"
	}
	if b.GoVersion != "" {
		s += " " + b.GoVersion
	}
	return s
}

// docApp is a fresh command tree for the generated documents: one that
// has not run, so it holds no help commands of its own making.
func docApp() *ucli.App {
	app := newApp(nil, io.Discard, io.Discard)
	withoutGlobalFlags(app.Commands)
	return app
}

// withoutGlobalFlags drops the global flags from cmds, for documents that
// list them once, under the app.
func withoutGlobalFlags(cmds []*ucli.Command) {
	for _, c := range cmds {
		c.Flags = slices.DeleteFunc(c.Flags, func(f ucli.Flag) bool {
			cf, ok := f.(ucli.CategorizableFlag)
			return ok && cf.GetCategory() == globalCategory
		})
		withoutGlobalFlags(c.Subcommands)
	}
}

// infoCommands are the commands about tally itself.
func infoCommands() []*ucli.Command {
	return []*ucli.Command{versionCommand(), completionCommand(), manCommand()}
}

// versionCommand is `tally version`.
func versionCommand() *ucli.Command {
	return &ucli.Command{
		Name:   "version",
		Usage:  "print the version, the commit it was built from and the Go version",
		Action: runVersion,
	}
}

// runVersion runs `tally version`.
func runVersion(c *ucli.Context) error {
	b := readBuildInfo()
	if globalBool(c, "json") {
		return jsonLine(c, b)
	}
	showf(c.App.Writer, "tally %s\n", versionString())
	return nil
}

// manCommand is `tally man`.
func manCommand() *ucli.Command {
	return &ucli.Command{
		Name:        "man",
		Usage:       "print the manual page (roff), generated from the command tree",
		Description: "For example: tally man > tally.1 && man ./tally.1",
		Action:      runMan,
	}
}

// runMan runs `tally man`.
func runMan(c *ucli.Context) error {
	s, err := docApp().ToManWithSection(1)
	if err != nil {
		return err
	}
	io.WriteString(c.App.Writer, s)
	return nil
}
