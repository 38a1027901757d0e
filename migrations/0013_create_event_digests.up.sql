SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- GitHub, Shopify and Twilio do not sign the header their event id is
-- in: a copy of a captured delivery with a fresh id would pass as a new
-- event. For a source that turns the guard on, each event's signed
-- content digest (what its signature covers: verify.SignedDigest) is kept
-- here until expires_at, with the event it was first recorded as; a
-- delivery whose digest is here under another id is answered as a
-- duplicate of that event and writes nothing. A row past expires_at
-- counts as absent and is taken over by the next event with its digest;
-- retention deletes old ones.
CREATE TABLE event_digests (
    source      text        NOT NULL,
    digest      bytea       NOT NULL,
    external_id text        NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (source, digest)
);

CREATE INDEX event_digests_expires_at_idx ON event_digests (expires_at);
