// Package suggest finds the word an operator probably meant: the closest
// of the known ones to a misspelt key, scheme or command.
package suggest

import "github.com/agnivade/levenshtein"

// Closest returns the candidate closest to word by edit distance, and
// whether it is close enough to suggest: at most a third of word's
// length apart (at least 1, at most 3 edits), so "lsiten" suggests
// "listen" and "zzz" suggests nothing.
func Closest(word string, candidates []string) (string, bool) {
	best, bestDist := "", -1
	for _, c := range candidates {
		if d := levenshtein.ComputeDistance(word, c); bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	limit := min(max(len(word)/3, 1), 3)
	return best, bestDist >= 0 && bestDist <= limit
}

// DidYouMean returns " (did you mean X?)" for the closest candidate, or
// "" when none is close.
func DidYouMean(word string, candidates []string) string {
	if c, ok := Closest(word, candidates); ok && c != word {
		return " (did you mean " + c + "?)"
	}
	return ""
}
