// Package layout holds the test that keeps webhookd's dependency
// direction: cmd wires everything; gateway and jobs use dedupe; dedupe
// imports neither them nor Echo or Asynq; jobs never imports gateway;
// migrations imports none of webhookd's packages; and no production code
// imports a test helper package.
package layout
