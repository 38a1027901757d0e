package admincli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd/config"
	"github.com/webhookd/webhookd/gateway/admin/adminclient"
)

// AddServerFlag adds --server to an operator command.
func AddServerFlag(cmd *cobra.Command) {
	cmd.PersistentFlags().String("server", "",
		"the running webhookd's base URL (default: the config's listen address, else "+adminclient.DefaultServer+"); the admin token is read from $"+adminclient.TokenEnv)
}

// NewClient returns a client for the gateway --server names, else
// the one the config's listen address names, else
// adminclient.DefaultServer when no config file is there.
func NewClient(cmd *cobra.Command) (*adminclient.Client, error) {
	server, _ := cmd.Flags().GetString("server")
	if server == "" {
		path, _ := cmd.Flags().GetString("config")
		cfg, err := config.Load(path)
		switch {
		case errors.Is(err, fs.ErrNotExist) && !cmd.Flags().Changed("config"):
			server = adminclient.DefaultServer
		case err != nil:
			return nil, fmt.Errorf("%w\n(the operator commands read only listen from it; --server names the gateway instead)", err)
		default:
			if server, err = adminclient.ServerOf(cfg.Process.Listen); err != nil {
				return nil, err
			}
		}
	}
	return adminclient.New(server, os.Getenv(adminclient.TokenEnv))
}

// cliUser is the default "by" of a replay, pause or resume from the
// command line.
func cliUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u + " (cli)"
	}
	return "cli"
}
