SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- The newest version of each ordered entity forwarded to each destination.
CREATE TABLE entity_versions (
    source      text        NOT NULL,
    destination text        NOT NULL,
    entity      text        NOT NULL,
    version     text        NOT NULL,
    key         text        NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, destination, entity)
);

-- webhookd_version_cmp compares two versions: as numbers when both parse as
-- numbers, as RFC 3339 times when both parse as times, else byte-wise.
-- It returns -1, 0 or 1.
CREATE FUNCTION webhookd_version_cmp(a text, b text) RETURNS integer
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    num  constant text := '^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$';
    rfc3339 constant text := '^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$';
    ta timestamptz;
    tb timestamptz;
BEGIN
    IF a ~ num AND b ~ num THEN
        RETURN sign(a::numeric - b::numeric)::integer;
    END IF;
    IF a ~ rfc3339 AND b ~ rfc3339 THEN
        BEGIN
            ta := a::timestamptz;
            tb := b::timestamptz;
            RETURN CASE WHEN ta < tb THEN -1 WHEN ta > tb THEN 1 ELSE 0 END;
        EXCEPTION WHEN others THEN
            NULL; -- not a valid time after all: fall through to bytes
        END;
    END IF;
    RETURN CASE WHEN a COLLATE "C" < b COLLATE "C" THEN -1
                WHEN a COLLATE "C" > b COLLATE "C" THEN 1
                ELSE 0 END;
END
$$;
