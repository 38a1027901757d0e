// Package layout holds the test that keeps webhookd's dependency
// direction: cmd wires everything; gateway and jobs use dedupe; dedupe
// imports neither them nor Echo or Asynq; jobs never imports gateway;
// migrations imports none of webhookd's packages; the leaves under
// internal/ import nothing of ours but each other; and no production code
// imports the test-support tree (internal/testkit) — each directly or
// through any chain of imports.
package layout
