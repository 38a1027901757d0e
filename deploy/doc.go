// Package deploy holds webhookd's deploy kit, which is not Go: the Helm
// chart (helm/webhookd), the Grafana dashboard (grafana/webhookd.json) and
// the Prometheus alert rules with their promtool tests (prometheus/).
// Its tests tie the kit to the product: every series the dashboard, the
// alert rules and the rules' tests name is one a freshly started webhookd
// process exports on /metrics. .ci/deploy-check runs the tools (helm lint,
// kubeconform, promtool); kubeschema builds kubeconform's schemas offline.
package deploy
