package dedupe

// A copy of a signed delivery under another event id. GitHub, Shopify and
// Twilio sign the body (Twilio: the URL and form parameters) but not the
// header their event id is in, so whoever captures one delivery can send
// it again under fresh ids, each a valid signature on a "new" event. For
// a source that turns the guard on, the gateway gives each event the
// digest of what its signature covers (Event.ContentDigest), and the
// record statement keeps it in event_digests (migration 0013) with the
// id it was first recorded under, until its window ends. A delivery whose
// digest is there under another id is a copy of that event: it is
// answered as its duplicate and writes nothing, neither an event nor a
// delivery count (the sender did not deliver it). A sender's own retry
// carries the event's id and is the usual duplicate. All SQL on the
// table is in this file, except retention's delete of expired rows.

// eventsSignedInputSQL is eventsInputSQL with each event's signed content
// digest (NULL when unset) and its window in milliseconds, $12 and $13.
const eventsSignedInputSQL = `
input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::bytea[],
                         $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::bytea[], $13::bigint[])
        AS u(s, x, d, ct, h, p, oe, ov, pl, t, tp, dg, dw)
)`

// recordSignedSQL is recordSQL for a batch with digests (RecordBatch has
// made each event's (source, digest) unique in it). signed claims each
// digest for its event, in digest order, or finds the event that holds it
// (a row past expires_at is taken over); copies are the events whose
// digest another id holds; only the others are recorded. A copy reports
// the event it copies: its deliveries and state as this statement's
// snapshot shows them, or a first delivery's when that event committed
// while this statement waited for its digest. Every row gets a last
// column, copy_of: that event's id, or "".
var recordSignedSQL = `
WITH ` + eventsSignedInputSQL + `, signed AS (
    INSERT INTO event_digests AS g (source, digest, external_id, expires_at)
    SELECT s, dg, x, now() + dw * interval '1 millisecond' FROM input WHERE dg IS NOT NULL ORDER BY s, dg
    ON CONFLICT (source, digest) DO UPDATE
        SET external_id = CASE WHEN g.expires_at <= now() THEN EXCLUDED.external_id ELSE g.external_id END,
            expires_at = CASE WHEN g.expires_at <= now() THEN EXCLUDED.expires_at ELSE g.expires_at END
    RETURNING g.source, g.digest, g.external_id
), copies AS (
    SELECT i.s, i.x, g.external_id AS first
    FROM input i JOIN signed g ON g.source = i.s AND g.digest = i.dg
    WHERE g.external_id <> i.x
), kept AS (
    SELECT i.* FROM input i WHERE NOT EXISTS (SELECT 1 FROM copies c WHERE c.s = i.s AND c.x = i.x)
), ` + recordCTEsSQL("kept") + recordReportSQL(", ''") + `
UNION ALL
SELECT c.s, c.x, COALESCE(` + deliveriesSQL("e.source", "e.external_id") + `, 1), false, false,
       CASE WHEN e.source IS NULL THEN 'received' ELSE
           ` + eventStateSQL("e.source", "e.external_id", "e.plan", "e.recorded_only", "NOT "+outboxHasSQL("e.source", "e.external_id")) + `
       END,
       true, 0::bigint, c.first
FROM copies c LEFT JOIN events e ON e.source = c.s AND e.external_id = c.first`
