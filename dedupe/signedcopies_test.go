package dedupe_test

import (
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
)

func signedEvent(id, digest string) dedupe.Event {
	return dedupe.Event{Source: "src", ExternalID: id, ContentType: "application/json", Payload: []byte(`{}`),
		ContentDigest: []byte(digest), ContentWindow: time.Hour}
}

// TestRecordSignedCopiesInOneBatch: copies under other ids in the batch
// of their event, or with an id whose own digest another event holds,
// are answered as copies and written nowhere; no combination fails the
// statement (each event row and each digest is written once).
func TestRecordSignedCopiesInOneBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := dedupe.RecordBatch(testCtx(t), b.schema.Pool, []dedupe.Event{signedEvent("a", "D1")}); err != nil {
		t.Fatal(err)
	}
	got, err := dedupe.RecordBatch(testCtx(t), b.schema.Pool, []dedupe.Event{
		signedEvent("c", "D2"),                                  // new
		signedEvent("d", "D2"),                                  // a copy of c, in the batch
		signedEvent("c", "D2"),                                  // c's repeat
		signedEvent("z", "D1"),                                  // a copy of a, recorded before
		signedEvent("a", "D3"),                                  // a's id with other content: a's repeat
		signedEvent("y", "D3"),                                  // a copy of the line above's content
		{Source: "src", ExternalID: "u", Payload: []byte(`{}`)}, // unguarded
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []dedupe.Recorded{
		{Inserted: true, Deliveries: 1, Pending: true, State: "received"},
		{Deliveries: 2, State: "received", CopyOf: "c"},
		{Deliveries: 2, Pending: true, State: "received"},
		{Deliveries: 1, State: "received", CopyOf: "a"},
		{Deliveries: 2, Pending: true, State: "received"},
		{Deliveries: 2, State: "received", CopyOf: "a"},
		{Inserted: true, Deliveries: 1, Pending: true, State: "received"},
	}
	for i := range want {
		if (got[i].RecordXID != 0) != got[i].Inserted {
			t.Errorf("event %d: inserted %v, by transaction %d", i, got[i].Inserted, got[i].RecordXID)
		}
		got[i].RecordXID, got[i].RecordedWith = 0, 0
		if got[i] != want[i] {
			t.Errorf("event %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if ids := b.schema.Int(t, `SELECT count(*) FROM events`); ids != 3 {
		t.Errorf("%d events, want a, c and u", ids)
	}
}
