package webhookd

import _ "embed"

// ExampleConfig is webhookd.example.yaml, built in: `webhookd demo` runs
// it when the file is not in the current directory, so the demo works
// from an installed binary too.
//
//go:embed webhookd.example.yaml
var ExampleConfig []byte

// ExampleConfigPath is the example configuration's file name.
const ExampleConfigPath = "webhookd.example.yaml"
