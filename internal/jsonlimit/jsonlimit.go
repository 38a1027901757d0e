// Package jsonlimit checks a webhook body before any JSON work reads it.
// Every JSON parser webhookd runs on a request body (gjson's validator,
// encoding/json, a rule's conversion of the payload) recurses or keeps a
// frame per level of nesting; a body of a million '[' would grow one
// goroutine's stack to hundreds of MiB — which Go keeps after the request
// — or end the process with a stack overflow that no recover catches.
// Valid walks the body once, iteratively, and refuses nesting deeper than
// MaxDepth before anything recursive sees it.
//
// It imports nothing of webhookd's, so the verifiers, the id extractors
// and the delivery side can all use it.
package jsonlimit

import "github.com/tidwall/gjson"

// MaxDepth is the deepest nesting of arrays and objects Valid accepts.
// Providers' payloads nest under 20 levels; 128 is serde_json's limit,
// and gjson's recursive validator needs only a few KiB of stack for it.
const MaxDepth = 128

// Valid reports whether b is one valid JSON value nested at most MaxDepth
// levels deep. It reads b once without recursion before handing it to
// the validator, so a hostile body costs a bounded stack and, when it is
// too deep, only the bytes up to its MaxDepth+1'th opening bracket.
func Valid(b []byte) bool {
	return DepthOK(b) && gjson.ValidBytes(b)
}

// DepthOK reports whether no array or object in b is nested more than
// MaxDepth levels deep, counting brackets outside strings. It does not
// check that b is JSON; Valid does both.
func DepthOK(b []byte) bool {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '[', '{':
			depth++
			if depth > MaxDepth {
				return false
			}
		case ']', '}':
			depth--
		case '"':
			// Skip the string: a bracket inside it nests nothing.
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		}
	}
	return true
}
