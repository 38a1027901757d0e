package webhookd

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// BuildInfo says which build of webhookd is running.
type BuildInfo struct {
	// Version is the module version ("(devel)" for a build from a
	// checkout).
	Version string
	// Revision is the VCS commit the binary was built from, with
	// "-dirty" when the tree had changes; "" when unknown (go run).
	Revision string
	// GoVersion is the Go toolchain that built it.
	GoVersion string
}

// ReadBuildInfo returns what the binary knows of its own build.
func ReadBuildInfo() BuildInfo {
	b := BuildInfo{Version: "unknown", GoVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Version = info.Main.Version
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && b.Revision != "" {
		b.Revision += "-dirty"
	}
	return b
}

// registerBuildInfo exports webhookd_build_info{version,revision,
// go_version} 1, so a dashboard shows which build each process runs and
// an alert can spot replicas of different builds.
func registerBuildInfo(reg prometheus.Registerer, b BuildInfo) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "webhookd_build_info",
		Help: "Always 1; its labels say which build of webhookd this process runs.",
	}, []string{"version", "revision", "go_version"})
	g.WithLabelValues(b.Version, b.Revision, b.GoVersion).Set(1)
	reg.MustRegister(g)
}
